// Package layering holds no code: its test checks, on the real build
// graph (`go list -deps`), that each package imports nothing it must not,
// with the reason for each rule. The rules are the table in
// layering_test.go; CI runs it with the rest of the suite.
package layering
