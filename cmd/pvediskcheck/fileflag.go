package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/node"
)

// contentSuffix names the hidden flag that carries a file flag's content
// to another node: --policy FILE here is --policy-content=... there.
const contentSuffix = "-content"

// fileFlag is a flag naming a file of the admin's that the command reads
// whole (--policy), through node.Node.ReadInput: a regular file, at most
// max bytes, within --timeout, wherever it is (it is the admin's file, not
// the node's, so --root does not move it). A node asked in cluster mode
// cannot read a path of this one: remoteArgs reads the file here, checks
// it (a bad file stops the run before any node is asked), and sends its
// name and content as --NAME-content (base64: printable, one word for the
// remote shell), which readFileArg reads there in place of the path.
type fileFlag struct {
	*cli.StringFlag
	max   int
	check func(name string, data []byte) error
}

// flags are the file flag and its hidden content flag, for a command's
// flag list.
func (f *fileFlag) flags() []cli.Flag {
	return []cli.Flag{f, &cli.StringFlag{Name: f.Name + contentSuffix, Hidden: true, Usage: "the --" + f.Name + " file's name and content (sent by cluster mode)"}}
}

// fileArg is a file flag's file as read once per run.
type fileArg struct {
	name string
	data []byte
}

// readFileArg returns a file flag's file: the content another node sent,
// else the file the path names, read once per run (cluster mode asks for
// it once per node); ok false when the flag is not given.
func readFileArg(c *cli.Context, e *env, name string) (file string, data []byte, ok bool, err error) {
	if c.IsSet(name + contentSuffix) {
		file, data, err = decodeFileArg(c.String(name + contentSuffix))
		if err != nil {
			return "", nil, false, exitcode.Usagef("--%s%s: %v", name, contentSuffix, err)
		}
		return file, data, true, nil
	}
	if !c.IsSet(name) {
		return "", nil, false, nil
	}
	if a, done := e.files[name]; done {
		return a.name, a.data, true, nil
	}
	path := c.String(name)
	if path == "" {
		return "", nil, false, exitcode.Usagef("--%s: give a file", name)
	}
	max := node.MaxFileBytes
	for _, f := range c.Command.Flags {
		if ff, is := f.(*fileFlag); is && ff.Name == name {
			max = ff.max
		}
	}
	data, err = e.node.ReadInput(e.ctx(), path, max)
	switch {
	case err == nil:
	case errors.Is(err, os.ErrNotExist):
		return "", nil, false, exitcode.Usagef("--%s %s: no such file", name, path)
	case exitcode.Of(err) == exitcode.Unreachable:
		return "", nil, false, exitcode.Wrap(exitcode.Unreachable, "--"+name, err)
	default:
		return "", nil, false, exitcode.Wrap(exitcode.Usage, "--"+name, err)
	}
	if e.files == nil {
		e.files = map[string]fileArg{}
	}
	e.files[name] = fileArg{path, data}
	return path, data, true, nil
}

// encodeFileArg is --NAME-content's value: the file's name and its
// content, each base64, joined by ':' (no base64 character).
func encodeFileArg(name string, data []byte) string {
	return base64.StdEncoding.EncodeToString([]byte(name)) + ":" + base64.StdEncoding.EncodeToString(data)
}

func decodeFileArg(v string) (string, []byte, error) {
	a, b, ok := strings.Cut(v, ":")
	name, err1 := base64.StdEncoding.DecodeString(a)
	data, err2 := base64.StdEncoding.DecodeString(b)
	if !ok || err1 != nil || err2 != nil {
		return "", nil, fmt.Errorf("not a file as cluster mode sends it (NAME:CONTENT, each base64)")
	}
	return string(name), data, nil
}

// remoteFileArg is a file flag as another node gets it: the file read and
// checked here, sent as its content.
func remoteFileArg(c *cli.Context, e *env, f *fileFlag) (string, error) {
	name, data, _, err := readFileArg(c, e, f.Name)
	if err != nil {
		return "", err
	}
	if f.check != nil {
		if err := f.check(name, data); err != nil {
			return "", err
		}
	}
	return "--" + f.Name + contentSuffix + "=" + encodeFileArg(name, data), nil
}
