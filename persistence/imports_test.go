package persistence_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/hyapp/roomcell/"

// Storage must not depend on its users: a backend importing the room or
// wallet actors (or the gRPC, delivery, cluster or cmd layers above them)
// would tie the store's contract to their code and invite import cycles.
// The check follows this module's imports transitively, so a helper
// package that pulls in actors/ is caught too. It reads the sources itself
// (rather than running go list) so go test's cache sees every file it
// depends on.
func TestNoPersistencePackageImportsActors(t *testing.T) {
	users := []string{"actors", "grpcapi", "delivery", "cluster", "cmd"}
	var roots []string
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() != "testdata" {
			roots = append(roots, filepath.ToSlash(filepath.Join("persistence", path)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// persistence, backend, memdb, mysql, mysqltest, redis, redistest,
	// storetest: fewer means the walk ran somewhere else.
	if len(roots) < 8 {
		t.Fatalf("found %d packages under persistence/, want at least 8: %v", len(roots), roots)
	}
	for _, root := range roots {
		// via records how each package was reached, for the message.
		via := map[string]string{root: ""}
		queue := []string{root}
		for len(queue) > 0 {
			pkg := queue[0]
			queue = queue[1:]
			for _, imp := range moduleImports(t, pkg) {
				for _, u := range users {
					if imp == u || strings.HasPrefix(imp, u+"/") {
						t.Errorf("%s imports %s (via %s)", root, module+imp, pkg)
					}
				}
				if _, seen := via[imp]; !seen {
					via[imp] = pkg
					queue = append(queue, imp)
				}
			}
		}
	}
}

// moduleImports returns the module-relative paths this module's package
// at dir (module-relative) imports from its non-test files.
func moduleImports(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join("..", dir))
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", dir, name), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatalf("parse %s/%s: %v", dir, name, err)
		}
		for _, spec := range f.Imports {
			path, _ := strconv.Unquote(spec.Path.Value)
			if strings.HasPrefix(path, module) {
				out = append(out, strings.TrimPrefix(path, module))
			}
		}
	}
	return out
}
