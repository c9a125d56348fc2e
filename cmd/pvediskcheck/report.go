package main

import (
	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/fioreport"
	"github.com/pvediskcheck/pvediskcheck/outfile"
)

// reportFlag is --report FILE of bench and fio compare: the self-contained
// HTML page (fioreport).
func reportFlag() *cli.StringFlag {
	return &cli.StringFlag{Name: "report", TakesFile: true, Usage: "also write the results as one self-contained HTML `FILE` (inline SVG charts); an existing file is replaced only when it is such a report"}
}

// checkReport checks --report before anything is measured or read (nil
// without --report; --report "" is refused): package outfile's rules.
func checkReport(c *cli.Context) (*outfile.File, error) {
	if !c.IsSet("report") {
		return nil, nil
	}
	return outfile.Check("report", c.String("report"), fioreport.Ours, 0o644)
}

// writeReport writes the page to --report (nil writes nothing).
func writeReport(f *outfile.File, page []byte) error {
	if f == nil {
		return nil
	}
	return f.WriteBytes(page)
}
