package layers

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// effectConsumers are the packages that do what an event causes outside
// the room (IM, TRTC, notices, the MQ topic, retention's hold for the
// notice worker). They read the event's row in the registry
// (room.EventInfoOf, room.Causes), never a switch of their own keyed by
// the event type: "what does a kick cause?" has one answer, in room/.
var effectConsumers = []string{"delivery", "actors/relay", "actors/notice", "persistence"}

// Test helpers and the suite that drives stores with real events may
// name types; the code that decides may not.
var effectConsumersExcept = []string{"persistence/storetest"}

var typeRef = regexp.MustCompile(`\broom\.Type[A-Z]\w*`)

func TestNoConsumerDecidesByEventType(t *testing.T) {
	root := filepath.Join("..", "..")
	files := 0
	for _, dir := range effectConsumers {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			for _, e := range effectConsumersExcept {
				if under(rel, e) {
					return filepath.SkipDir
				}
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			files++
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for i, line := range strings.Split(string(src), "\n") {
				if strings.HasPrefix(strings.TrimSpace(line), "//") {
					continue
				}
				if m := typeRef.FindString(line); m != "" {
					t.Errorf("%s:%d decides by %s: read the event's row (room.Causes) instead", rel, i+1, m)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 50 {
		t.Fatalf("only %d files read: the walk ran somewhere else", files)
	}
}
