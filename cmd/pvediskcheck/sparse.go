package main

import (
	"os"
	"syscall"
)

// isSparse reports a regular file that allocates less than its size.
func isSparse(path string) bool {
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() {
		return false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && sys.Blocks*512 < st.Size()
}
