package grammar

// Labels returns the output labels a workflow produces, each once, in the
// order their first producer appears in the source.
func Labels(w *Workflow) []string {
	var out []string
	seen := map[string]bool{}
	WalkServices(w, func(s *Service) {
		if l := s.Label(); !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	})
	return out
}

// Stats counts the services of w, its pattern nesting depth (0 for a plain
// sequence) and the largest number of branches or arms of any one pattern
// (0 when there is no pattern).
func Stats(w *Workflow) (services, depth, widest int) {
	var walk func(w *Workflow, d int)
	walk = func(w *Workflow, d int) {
		if w == nil {
			return
		}
		depth = max(depth, d)
		for _, s := range w.Steps {
			var bodies []*Workflow
			switch s := s.(type) {
			case *Service:
				services++
				continue
			case *Fork:
				bodies = s.Branches
			case *First:
				bodies = s.Branches
			case *Failover:
				bodies = s.Branches
			case *Choice:
				for _, a := range s.Arms {
					if a != nil {
						bodies = append(bodies, a.Body)
					}
				}
			}
			depth = max(depth, d+1)
			widest = max(widest, len(bodies))
			for _, b := range bodies {
				walk(b, d+1)
			}
		}
	}
	walk(w, 0)
	return services, depth, widest
}

// WalkServices calls fn for every service of w in source order, inside
// every pattern and arm.
func WalkServices(w *Workflow, fn func(*Service)) {
	if w == nil {
		return
	}
	for _, s := range w.Steps {
		switch s := s.(type) {
		case *Service:
			fn(s)
		case *Fork:
			for _, b := range s.Branches {
				WalkServices(b, fn)
			}
		case *First:
			for _, b := range s.Branches {
				WalkServices(b, fn)
			}
		case *Failover:
			for _, b := range s.Branches {
				WalkServices(b, fn)
			}
		case *Choice:
			for _, a := range s.Arms {
				if a != nil {
					WalkServices(a.Body, fn)
				}
			}
		}
	}
}
