package persistence_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Storage must not depend on its users: a backend importing the room or
// wallet actors would tie the store's contract to their code and invite
// import cycles. The check follows transitive imports (go list -deps), so
// a helper package that pulls in actors/ is caught too.
func TestNoPersistencePackageImportsActors(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const actors = "github.com/hyapp/roomcell/actors"
	pkgs := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkgs++
		for _, dep := range fields[1:] {
			if dep == actors || strings.HasPrefix(dep, actors+"/") {
				t.Errorf("%s imports %s (directly or through another package)", fields[0], dep)
			}
		}
	}
	// persistence, memdb, mysql, mysqltest, redis, redistest, storetest:
	// fewer means go list ran somewhere else and checked nothing.
	if pkgs < 7 {
		t.Fatalf("go list saw %d packages under persistence/, want at least 7:\n%s", pkgs, out)
	}
}
