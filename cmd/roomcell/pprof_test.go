package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hyapp/roomcell/configs"
)

// /debug/pprof exists only when http.pprof is set: it exposes heap
// contents, so the default must not serve it.
func TestPprofOnlyWhenEnabled(t *testing.T) {
	// One server at a time (a subtest each): two in one process race in
	// gRPC's global logger when the second starts.
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprint("pprof=", on), func(t *testing.T) {
			app, _ := startDev(t, func(c *configs.Config) { c.HTTP.Pprof = on })
			resp, err := http.Get("http://" + app.HTTPAddr() + "/debug/pprof/")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			served := resp.StatusCode == http.StatusOK && strings.Contains(string(body), "goroutine")
			if served != on {
				t.Fatalf("http.pprof=%v: /debug/pprof/ answered %d (served=%v)", on, resp.StatusCode, served)
			}
		})
	}
}
