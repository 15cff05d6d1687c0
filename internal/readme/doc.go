// Package readme holds no code. Its test replays the console transcripts
// of README.md, kept in testdata/transcript.txt, in order against the
// real binaries: `poolagent dev` (an embedded etcd with the demo pool)
// and `poolctl`. It checks each command's output and exit code, with
// tokens, revisions, times, ages, lease TTLs and process ids normalised,
// and checks that every README block marked `<!-- transcript: NAME -->`
// is the script's block NAME, so that the README cannot drift from the
// code. `go test ./internal/readme -update` rewrites those README blocks
// from the script.
package readme
