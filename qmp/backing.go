package qmp

// Backing walks a format node's backing chain in the live graph: each
// "backing" child is the next layer down (a format node over its own
// protocol node), newest first. Empty for an image without a backing file.
// A node met twice ends the walk (a malformed graph cannot loop).
func (g *Graph) Backing(format string) []DriveChain {
	var out []DriveChain
	seen := map[string]bool{format: true}
	cur := format
	for {
		child, ok := g.Children[cur]["backing"]
		if !ok || seen[child] {
			break
		}
		seen[child] = true
		c, ok := g.Chain(child)
		if !ok {
			break
		}
		out = append(out, c)
		cur = c.Format.Name
	}
	return out
}
