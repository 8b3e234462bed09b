package env_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// protocolDirs are the packages whose code must take time and randomness
// from an env.Env (relative to this package's directory).
var protocolDirs = []string{"..", "../rpc", "../journal", "../core", "../sim", "../explore", "../coreruntime"}

// wallClockAllowed lists, by path relative to this package's directory,
// the files that may read the wall clock or the global random source, and
// why. Keep it short: a file here hides every such call in it.
var wallClockAllowed = map[string]string{
	// The test-only failpoints stall the real process (the crash tests of
	// package testnet set them through the environment): the stall stands
	// for a stuck process and is meant to take wall time.
	"../failpoint.go": "failpoint stall",
	// NewMux, Serve and journal.Open fall back to the wall clock when the
	// caller passes no clock (clockwork.NewRealClock); the node always
	// passes its own.
	"../rpc/mux.go":         "nil clock default",
	"../rpc/rpc.go":         "nil clock default",
	"../journal/journal.go": "nil clock default",
	// The core's runtime shell over libp2p defaults to the wall clock when
	// its Config names none.
	"../coreruntime/runtime.go": "nil clock default",
}

// wallClockFuncs are the functions of package time that read the wall
// clock or wait on it.
var wallClockFuncs = []string{"Now", "Since", "Until", "After", "AfterFunc", "NewTimer", "NewTicker", "Tick", "Sleep"}

// randTypes are the names of math/rand(/v2) that are types, not
// functions: naming them draws nothing.
var randTypes = []string{"Rand", "Source", "Source64", "PCG", "ChaCha8", "Zipf",
	// Constructors of a source from an explicit seed read no global
	// state: a seeded stream is what protocol code should use.
	"New", "NewPCG", "NewChaCha8", "NewZipf"}

// wallClockUses reports, as "file:line: what", every use in src of a
// wall-clock function of package time, of a top-level math/rand or
// math/rand/v2 function, and of clockwork.NewRealClock.
func wallClockUses(fset *token.FileSet, name string, src any) ([]string, error) {
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	// The names the file gives the packages watched (imports may be
	// renamed); a dot import is reported itself.
	var out []string
	pkgs := map[string]string{} // local name -> import path
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		local := filepath.Base(path)
		switch path {
		case "time", "github.com/jonboulle/clockwork":
		case "math/rand", "math/rand/v2":
			local = "rand"
		default:
			continue
		}
		if imp.Name != nil {
			local = imp.Name.Name
		}
		if local == "." {
			out = append(out, fmt.Sprintf("%s: dot import of %s", fset.Position(imp.Pos()), path))
			continue
		}
		pkgs[local] = path
	}
	if len(pkgs) == 0 {
		return out, nil
	}
	// Identifiers declared in the file that shadow an import name (a
	// local variable called rand) are not the package; without type
	// information, a selector on such a name in a function that declares
	// it is skipped.
	ast.Inspect(f, func(n ast.Node) bool {
		fn, ok := n.(*ast.FuncDecl)
		if !ok {
			return true
		}
		shadowed := map[string]bool{}
		ast.Inspect(fn, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.AssignStmt:
				if x.Tok == token.DEFINE {
					for _, l := range x.Lhs {
						if id, ok := l.(*ast.Ident); ok && pkgs[id.Name] != "" {
							shadowed[id.Name] = true
						}
					}
				}
			case *ast.Field:
				for _, id := range x.Names {
					if pkgs[id.Name] != "" {
						shadowed[id.Name] = true
					}
				}
			case *ast.ValueSpec:
				for _, id := range x.Names {
					if pkgs[id.Name] != "" {
						shadowed[id.Name] = true
					}
				}
			}
			return true
		})
		ast.Inspect(fn, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok || shadowed[id.Name] {
				return true
			}
			bad := false
			switch pkgs[id.Name] {
			case "time":
				bad = slices.Contains(wallClockFuncs, sel.Sel.Name)
			case "math/rand", "math/rand/v2":
				bad = !slices.Contains(randTypes, sel.Sel.Name)
			case "github.com/jonboulle/clockwork":
				bad = sel.Sel.Name == "NewRealClock"
			}
			if bad {
				out = append(out, fmt.Sprintf("%s: %s.%s", fset.Position(sel.Pos()), pkgs[id.Name], sel.Sel.Name))
			}
			return true
		})
		return false
	})
	return out, nil
}

// TestNoWallClock fails when protocol code reads the wall clock or the
// global random source instead of its env.Env: a simulator could not
// drive it.
func TestNoWallClock(t *testing.T) {
	fset := token.NewFileSet()
	files := 0
	var bad []string
	for _, dir := range protocolDirs {
		names, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			files++
			uses, err := wallClockUses(fset, name, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := wallClockAllowed[filepath.ToSlash(name)]; ok {
				continue
			}
			bad = append(bad, uses...)
		}
	}
	if files < 20 {
		t.Fatalf("checked %d files in %v: the package layout changed, fix protocolDirs", files, protocolDirs)
	}
	for allowed := range wallClockAllowed {
		if _, err := os.Stat(allowed); err != nil {
			t.Errorf("allow-listed %s: %v (drop it from wallClockAllowed)", allowed, err)
		}
	}
	if len(bad) > 0 {
		t.Errorf("protocol code reads the wall clock or the global random source; take them from the node's env.Env (n.clock, n.rand) instead:\n\t%s",
			strings.Join(bad, "\n\t"))
	}
}

// TestWallClockUsesFinds checks the checker on a file that breaks the rule
// in every way it knows, and on one that keeps it.
func TestWallClockUsesFinds(t *testing.T) {
	src := `package p

import (
	crand "crypto/rand"
	"math/rand/v2"
	tm "time"

	"github.com/jonboulle/clockwork"
)

func f() {
	_ = tm.Now()
	<-tm.After(tm.Second)
	now := tm.Now
	_ = now
	_ = rand.IntN(3)
	var r *rand.Rand
	_ = r
	_ = clockwork.NewRealClock()
	_, _ = crand.Read(nil)
	_ = tm.Duration(1)
}

func g(rand *struct{ IntN func(int) int }) { _ = rand.IntN(3) }
`
	got, err := wallClockUses(token.NewFileSet(), "p.go", src)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"p.go:12:6: time.Now",
		"p.go:13:4: time.After",
		"p.go:14:9: time.Now",
		"p.go:16:6: math/rand/v2.IntN",
		"p.go:19:6: github.com/jonboulle/clockwork.NewRealClock",
	}
	if !slices.Equal(got, want) {
		t.Errorf("found\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}
