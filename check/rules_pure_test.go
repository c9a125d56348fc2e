package check

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// TestRulesDoNoIO: no rule, nor any function of the package a rule calls
// (methods followed by name), reads the node: no os, unix, node or context
// call, no Runner, zvol, thin pool, agent or QMP call, no storage stat, and
// none of the measurements (measure's). What a rule needs is in its Input.
func TestRulesDoNoIO(t *testing.T) {
	fset := token.NewFileSet()
	funcs, methods := map[string]*ast.FuncDecl{}, map[string][]*ast.FuncDecl{}
	files, _ := filepath.Glob("*.go")
	for _, p := range files {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, p, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				if fd.Recv == nil {
					funcs[fd.Name.Name] = fd
				} else {
					methods[fd.Name.Name] = append(methods[fd.Name.Name], fd)
				}
			}
		}
	}
	measurements := map[string]bool{"measure": true, "measureLine": true, "statfs": true, "detectStalls": true, "readBinary": true, "judgePolicy": true, "askGuestOS": true, "VMLoaded": true, "VM": true, "Run": true}
	ioPackages := map[string]bool{"os": true, "unix": true, "node": true, "context": true, "backupcfg.Read": true}
	ioMethods := map[string]bool{"Run": true, "Fill": true, "Pool": true, "AskFreeze": true, "Agent": true, "Call": true, "Ask": true, "IsBlockDevice": true, "ReadFile": true}
	ioStorage := map[string]bool{"IsSparse": true, "StatImage": true, "ReturnsSpace": true}
	for _, ru := range rules {
		fn := any(ru.VM)
		if ru.Scope == PerDisk {
			fn = ru.Disk
		}
		name := runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name()
		name = name[strings.LastIndex(name, ".")+1:]
		seen := map[*ast.FuncDecl]bool{}
		var bad []string
		var walk func(fd *ast.FuncDecl, path string)
		walk = func(fd *ast.FuncDecl, path string) {
			if seen[fd] {
				return
			}
			seen[fd] = true
			ast.Inspect(fd.Body, func(x ast.Node) bool {
				call, ok := x.(*ast.CallExpr)
				if !ok {
					return true
				}
				switch f := call.Fun.(type) {
				case *ast.Ident:
					if measurements[f.Name] {
						bad = append(bad, path+" calls "+f.Name)
					} else if d := funcs[f.Name]; d != nil {
						walk(d, path+" -> "+f.Name)
					}
				case *ast.SelectorExpr:
					if pkg, ok := f.X.(*ast.Ident); ok && (ioPackages[pkg.Name] || ioPackages[pkg.Name+"."+f.Sel.Name] || pkg.Name == "storage" && ioStorage[f.Sel.Name]) {
						bad = append(bad, path+" calls "+pkg.Name+"."+f.Sel.Name)
						return true
					}
					if ioMethods[f.Sel.Name] {
						bad = append(bad, path+" calls ."+f.Sel.Name)
					}
					for _, d := range methods[f.Sel.Name] {
						walk(d, path+" -> "+f.Sel.Name)
					}
				}
				return true
			})
		}
		d := funcs[name]
		if d == nil {
			t.Errorf("%s: function %s not found", ru.Name, name)
			continue
		}
		walk(d, name)
		sort.Strings(bad)
		for _, b := range bad {
			t.Errorf("rule %s: %s", ru.Name, b)
		}
	}
}
