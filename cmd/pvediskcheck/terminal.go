package main

import (
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// screen is a full-screen display on a terminal that is redrawn in place:
// the alternate screen (the shell's screen comes back on exit), the cursor
// hidden, each frame written from the top-left corner with every line
// cleared to its end, so nothing scrolls.
type screen struct {
	w  io.Writer
	fd int // the terminal's fd, for its size
}

const (
	escAltScreenOn  = "\x1b[?1049h\x1b[?25l"
	escAltScreenOff = "\x1b[?25h\x1b[?1049l"
	escHome         = "\x1b[H"
	escClearLine    = "\x1b[K"
	escClearBelow   = "\x1b[J"
)

// newScreen draws through textOut: what the lines hold is escaped, the
// screen's own sequences are ctl's.
func newScreen(w io.Writer) *screen {
	s := &screen{w: newTextOut(w), fd: -1}
	if f, ok := rawOut(w).(*os.File); ok {
		s.fd = int(f.Fd())
	}
	io.WriteString(s.w, ctl(escAltScreenOn))
	return s
}

// size is the terminal's columns and rows (80x24 when it cannot tell).
func (s *screen) size() (cols, rows int) {
	if s.fd >= 0 {
		if ws, err := unix.IoctlGetWinsize(s.fd, unix.TIOCGWINSZ); err == nil && ws.Col > 0 && ws.Row > 0 {
			return int(ws.Col), int(ws.Row)
		}
	}
	return 80, 24
}

// draw replaces the screen's content with lines, each cut to the width, as
// many as fit.
func (s *screen) draw(lines []string) {
	cols, rows := s.size()
	var b strings.Builder
	b.WriteString(ctl(escHome))
	for i, l := range lines {
		if i >= rows {
			break
		}
		b.WriteString(cutText(l, cols))
		b.WriteString(ctl(escClearLine))
		if i < len(lines)-1 && i < rows-1 {
			b.WriteString(ctl("\r") + "\n")
		}
	}
	b.WriteString(ctl(escClearBelow))
	io.WriteString(s.w, b.String())
}

func (s *screen) close() { io.WriteString(s.w, ctl(escAltScreenOff)) }

// keyboard puts a terminal on stdin into cbreak mode (keys arrive one by one,
// not echoed; Ctrl-C still interrupts) and restores it on close.
type keyboard struct {
	fd   int
	orig *unix.Termios
}

// newKeyboard returns nil when r is not a terminal: keys are then not read.
func newKeyboard(r io.Reader) *keyboard {
	f, ok := r.(*os.File)
	if !ok {
		return nil
	}
	fd := int(f.Fd())
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil
	}
	orig := *t
	t.Lflag &^= unix.ICANON | unix.ECHO
	t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, t); err != nil {
		return nil
	}
	return &keyboard{fd: fd, orig: &orig}
}

func (k *keyboard) close() {
	if k != nil {
		_ = unix.IoctlSetTermios(k.fd, unix.TCSETS, k.orig)
	}
}
