package grammar

import "slices"

// Equal reports whether w and o are the same workflow: the same steps,
// service names, attributes (in order), paths, arm kinds and guards.
// Positions are ignored.
func (w *Workflow) Equal(o *Workflow) bool {
	if w == nil || o == nil {
		return w == o
	}
	return slices.EqualFunc(w.Steps, o.Steps, stepEqual)
}

func stepEqual(a, b Step) bool {
	switch a := a.(type) {
	case *Service:
		b, ok := b.(*Service)
		return ok && a.Name == b.Name && a.Path == b.Path && slices.Equal(a.Attrs, b.Attrs)
	case *Fork:
		b, ok := b.(*Fork)
		return ok && branchesEqual(a.Branches, b.Branches)
	case *First:
		b, ok := b.(*First)
		return ok && branchesEqual(a.Branches, b.Branches)
	case *Failover:
		b, ok := b.(*Failover)
		return ok && branchesEqual(a.Branches, b.Branches)
	case *Choice:
		b, ok := b.(*Choice)
		return ok && slices.EqualFunc(a.Arms, b.Arms, armEqual)
	}
	return false
}

func branchesEqual(a, b []*Workflow) bool {
	return slices.EqualFunc(a, b, (*Workflow).Equal)
}

func armEqual(a, b *Arm) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Kind == b.Kind && a.Guard == b.Guard && a.Body.Equal(b.Body)
}
