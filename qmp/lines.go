package qmp

import (
	"bufio"
	"errors"
	"fmt"
)

// Caps on what one line from a socket may hold. Every read is bounded in
// bytes as well as by its deadline: a socket that floods (a broken QEMU, a
// hostile process bound to the path) costs at most this much memory.
const (
	// MaxGreetingBytes: QEMU's greeting is about 200 bytes.
	MaxGreetingBytes = 64 << 10
	// MaxReplyBytes: the largest QMP replies seen are query-named-block-nodes
	// and query-blockstats (53 KB for 15 disks on QEMU 7.2); a VM with
	// hundreds of disks and long backing chains stays far below this.
	MaxReplyBytes = 16 << 20
	// MaxAgentReplyBytes: a guest-exec-status reply carries at most 16 MiB
	// of output (qemu-ga's GUEST_EXEC_MAX_OUTPUT), in base64.
	MaxAgentReplyBytes = 24 << 20
)

// ErrTooLarge is a line longer than its cap.
var ErrTooLarge = errors.New("reply too large")

// readLine reads one newline-terminated line of at most limit bytes. A
// line that fits in rd's buffer is returned in place, without a copy: it
// is valid only until the next read from rd (callers copy what they keep;
// an event skipped or a reply whose value is copied out costs no
// allocation of its own).
func readLine(rd *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		frag, err := rd.ReadSlice('\n')
		if line == nil && !errors.Is(err, bufio.ErrBufferFull) {
			if len(frag) > limit {
				return nil, fmt.Errorf("%w: more than %d bytes without a line end", ErrTooLarge, limit)
			}
			return frag, err
		}
		if len(line)+len(frag) > limit {
			return nil, fmt.Errorf("%w: more than %d bytes without a line end", ErrTooLarge, limit)
		}
		if len(line)+len(frag) > cap(line) {
			// Double: append's 1.25x growth for large slices would
			// allocate five times the final size on the way.
			grown := make([]byte, len(line), max(2*cap(line), len(line)+len(frag)))
			copy(grown, line)
			line = grown
		}
		line = append(line, frag...)
		if err == nil {
			return line, nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}
