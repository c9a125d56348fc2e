package main

import (
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
)

// reportFlag is --report FILE of bench and fio compare: the self-contained
// HTML page (fioreport).
func reportFlag() *cli.StringFlag {
	return &cli.StringFlag{Name: "report", Usage: "also write the results as one self-contained HTML `FILE` (inline SVG charts)"}
}

// checkReport refuses a --report whose directory does not exist, before
// anything is measured or read.
func checkReport(f string) error {
	if f == "" {
		return nil
	}
	if st, err := os.Stat(filepath.Dir(f)); err != nil || !st.IsDir() {
		return exitcode.Usagef("--report %s: no directory %s to write it in", f, filepath.Dir(f))
	}
	return nil
}

// writeReport writes the page to --report f ("" writes nothing).
func writeReport(f string, page []byte) error {
	if f == "" {
		return nil
	}
	if err := os.WriteFile(f, page, 0o644); err != nil {
		return exitcode.Wrap(exitcode.Usage, "--report", err)
	}
	return nil
}
