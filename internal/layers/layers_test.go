package layers

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/hyapp/roomcell/"

// rules: a package under (or equal to) the first path may not import,
// directly or through any of this module's packages, a package under any
// of the others. The layers, bottom up: configs, internal and ownership
// (leaves besides configs), api and errclass (leaves), room
// (the rules), persistence and delivery (storage and the outside world,
// which name events through room), actors (grains and workers), cluster,
// grpcapi, cmd.
var rules = []struct {
	pkg    string
	forbid []string
	except []string // packages under pkg the rule does not hold
}{
	// configs is the bottom: every layer reads it, it reads none.
	{"configs", []string{"api", "room", "errclass", "persistence", "delivery", "actors", "cluster", "ownership", "internal", "tencentcb", "grpcapi", "cmd"}, nil},
	// internal's helpers know nothing of rooms (configs alone).
	{"internal", []string{"api", "room", "errclass", "persistence", "delivery", "actors", "cluster", "ownership", "tencentcb", "grpcapi", "cmd"}, nil},
	// Room ownership (shards, leases) knows no room, store or actor: the
	// cluster and the grains read it.
	{"ownership", []string{"api", "room", "persistence", "delivery", "actors", "cluster", "tencentcb", "grpcapi", "cmd"}, nil},
	{"api", []string{"room", "errclass", "persistence", "delivery", "actors", "cluster", "grpcapi", "cmd", "configs"}, nil},
	{"errclass", []string{"api", "room", "persistence", "delivery", "actors", "cluster", "grpcapi", "cmd", "configs"}, nil},
	{"room", []string{"persistence", "delivery", "actors", "cluster", "grpcapi", "cmd", "configs"}, nil},
	{"persistence", []string{"delivery", "actors", "cluster", "grpcapi", "cmd"}, nil},
	{"delivery", []string{"actors", "cluster", "grpcapi", "cmd"}, nil},
	{"actors", []string{"grpcapi", "cmd", "cluster"}, nil},
	// The relay and the notice modules read room events; they never need
	// the grain runtime.
	{"actors/relay", []string{"actors/roomgrain"}, nil},
	{"actors/notice", []string{"actors/roomgrain"}, nil},
	// The room directory reaches the grain through the grain's Observer
	// interface: the grain never knows it.
	{"actors/roomgrain", []string{"actors/directory"}, nil},
	// The room's feed (its event tail, ListRoomEvents, WatchRoom) is an
	// observer too: the grain keeps the command log and never knows who
	// reads it.
	{"actors/roomgrain", []string{"actors/roomfeed"}, nil},
	// Departures (who left a room, when and why) explain refusals as an
	// observer.
	{"actors/roomgrain", []string{"actors/departures"}, nil},
	// Seat deadlines arm a timer per room and commit the expiry as the
	// room's own command, as an observer.
	{"actors/roomgrain", []string{"actors/seatdeadline"}, nil},
	// Likes are gathered into windows by an observer that commits them
	// through the room's command path.
	{"actors/roomgrain", []string{"actors/roomlikes"}, nil},
	// A room database's store gate is a node service the grains are
	// handed: it knows no actor.
	{"actors/storegate", []string{"actors", "cluster", "delivery"}, nil},
	// So is a room database's batcher of the publishers' marks.
	{"actors/outboxmarks", []string{"actors/roomgrain", "actors/relay", "cluster", "delivery"}, nil},
	// clustertest drives whole processes against a real database.
	{"cluster", []string{"actors", "grpcapi", "cmd", "delivery", "persistence"}, []string{"cluster/clustertest"}},
	{"grpcapi", []string{"cmd"}, nil},
	// Tencent's callbacks reach rooms through the room client's
	// interface: the endpoint knows no actor, store or cluster.
	{"tencentcb", []string{"actors", "cluster", "grpcapi", "cmd", "persistence/mysql", "persistence/memdb"}, nil},
}

func under(pkg, prefix string) bool { return pkg == prefix || strings.HasPrefix(pkg, prefix+"/") }

func TestNoImportRunsAgainstTheLayers(t *testing.T) {
	root := filepath.Join("..", "..")
	var pkgs []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "deploy" || name == "docs") {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(root, path)
		if len(moduleImports(t, root, filepath.ToSlash(rel))) > 0 || hasGo(path) {
			pkgs = append(pkgs, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Fewer means the walk ran somewhere else.
	if len(pkgs) < 30 {
		t.Fatalf("found %d packages, want at least 30: %v", len(pkgs), pkgs)
	}
	checked := 0
	for _, pkg := range pkgs {
		for _, r := range rules {
			if !under(pkg, r.pkg) || slices.ContainsFunc(r.except, func(e string) bool { return under(pkg, e) }) {
				continue
			}
			checked++
			via := map[string]string{pkg: ""}
			queue := []string{pkg}
			for len(queue) > 0 {
				p := queue[0]
				queue = queue[1:]
				for _, imp := range moduleImports(t, root, p) {
					for _, f := range r.forbid {
						if under(imp, f) && !under(pkg, f) {
							t.Errorf("%s imports %s (via %s): the %s layer may not reach %s", pkg, imp, p, r.pkg, f)
						}
					}
					if _, seen := via[imp]; !seen {
						via[imp] = p
						queue = append(queue, imp)
					}
				}
			}
		}
	}
	if checked < 25 {
		t.Fatalf("only %d package-rule pairs checked", checked)
	}
}

func hasGo(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	return len(m) > 0
}

// moduleImports returns the module-relative imports of the non-test files
// of the package at dir (module-relative).
func moduleImports(t *testing.T, root, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root, dir))
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, dir, name), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatalf("parse %s/%s: %v", dir, name, err)
		}
		for _, spec := range f.Imports {
			p, _ := strconv.Unquote(spec.Path.Value)
			if strings.HasPrefix(p, module) {
				out = append(out, strings.TrimPrefix(p, module))
			}
		}
	}
	return out
}
