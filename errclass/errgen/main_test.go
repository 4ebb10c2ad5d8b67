package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The checked-in table and list are what errors.json gives: editing the
// JSON without `make errors`, or a generated file by hand, fails here.
func TestGeneratedFilesMatchTheTable(t *testing.T) {
	dir := ".."
	src, err := os.ReadFile(filepath.Join(dir, tablePath))
	if err != nil {
		t.Fatal(err)
	}
	goSrc, doc, err := Render(src)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string][]byte{goPath: goSrc, docPath: doc} {
		got, err := os.ReadFile(filepath.Join(dir, path))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what errors.json gives: run `make errors`", path)
		}
	}
	rows, _ := Parse(src)
	if len(rows) < 40 {
		t.Fatalf("only %d rows", len(rows))
	}
	for _, r := range rows {
		if !bytes.Contains(doc, []byte(fmt.Sprintf("| %d | `%s` |", r.Code, r.Name))) || !regexp.MustCompile(fmt.Sprintf(`\b%s +Code = %d\n`, constName(r.Name), r.Code)).Match(goSrc) {
			t.Errorf("%s is missing from an output", r.Name)
		}
	}
}

// A table that breaks a rule is refused, naming the row.
func TestBadTablesAreRefused(t *testing.T) {
	row := `{"code":1,"name":"A","class":"not_found","grpc":"NOT_FOUND","retryable":false,"message":"m","doc":"d","metadata":[]}`
	if _, err := Parse([]byte("[" + row + "]")); err != nil {
		t.Fatalf("good table refused: %v", err)
	}
	for name, table := range map[string]string{
		"code taken twice":  "[" + row + "," + strings.Replace(row, `"A"`, `"B"`, 1) + "]",
		"name taken twice":  "[" + row + "," + strings.Replace(row, `"code":1`, `"code":2`, 1) + "]",
		"out of order":      "[" + strings.Replace(row, `"code":1`, `"code":2`, 1) + "," + strings.Replace(row, `"A"`, `"B"`, 1) + "]",
		"code 0":            "[" + strings.Replace(row, `"code":1`, `"code":0`, 1) + "]",
		"unknown class":     "[" + strings.Replace(row, `"not_found"`, `"teapot"`, 1) + "]",
		"unknown status":    "[" + strings.Replace(row, `"NOT_FOUND"`, `"TEAPOT"`, 1) + "]",
		"lower-case name":   "[" + strings.Replace(row, `"A"`, `"a"`, 1) + "]",
		"no doc":            "[" + strings.Replace(row, `"d"`, `" "`, 1) + "]",
		"no message":        "[" + strings.Replace(row, `"m"`, `""`, 1) + "]",
		"reserved meta key": "[" + strings.Replace(row, `[]`, `["code"]`, 1) + "]",
		"unknown field":     "[" + strings.Replace(row, `"doc"`, `"docs"`, 1) + "]",
	} {
		if _, err := Parse([]byte(table)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if constName("TOO_MANY_SEAT_REQUESTS") != "CodeTooManySeatRequests" {
		t.Fatalf("constName %q", constName("TOO_MANY_SEAT_REQUESTS"))
	}
}
