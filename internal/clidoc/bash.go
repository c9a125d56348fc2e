package clidoc

import (
	"io"
	"sort"
	"strings"
	"text/template"

	"github.com/urfave/cli/v2"
)

// BashOptions say how positional arguments are completed.
type BashOptions struct {
	// GlobalAfterCommand: the program also accepts global options after the
	// command (urfave/cli itself does not; pvediskcheck moves them).
	GlobalAfterCommand bool
	// RootFlag names the global flag (and RootEnv its variable) that moves the
	// node's filesystem root; VMIDs and disks are read below it.
	RootFlag string
	RootEnv  string
}

// Bash writes a static bash completion script for app: command and
// subcommand names, each command's own flags (global flags only before the
// command, unless GlobalAfterCommand), directories for --root/--proc/--sys
// style flags whose name says so, and for arguments named VMID and DISK in
// ArgsUsage the VMIDs of ROOT/etc/pve/qemu-server/*.conf and the disk keys
// of that VM's config, and for STORAGE the storage IDs of storage.cfg. It needs nothing but bash at completion time and does
// not run the program.
func Bash(w io.Writer, app *cli.App, o BashOptions) error {
	d := bashData{Name: app.Name, Func: "_" + strings.NewReplacer("-", "_", ".", "_").Replace(app.Name), RootFlag: o.RootFlag, RootEnv: o.RootEnv, GlobalAfter: o.GlobalAfterCommand}
	d.GlobalFlags, d.GlobalValueFlags, d.GlobalDirFlags = flagWords(app.VisibleFlags())
	for _, c := range visibleCommands(app.Commands, nil) {
		bc := bashCommand{Path: strings.Join(c.path, " ")}
		flags := c.cmd.VisibleFlags()
		if !c.cmd.HideHelp && !hasFlag(flags, "help") {
			flags = append(flags, cli.HelpFlag)
		}
		bc.Flags, bc.ValueFlags, bc.DirFlags = flagWords(flags)
		for _, s := range c.cmd.Subcommands {
			if !s.Hidden {
				bc.Subcommands = append(bc.Subcommands, s.Name)
			}
		}
		bc.Args = argKinds(c.cmd.ArgsUsage)
		d.Commands = append(d.Commands, bc)
		if len(c.path) == 1 {
			d.TopCommands = append(d.TopCommands, c.path[0])
		}
	}
	return bashTemplate.Execute(w, d)
}

type bashData struct {
	Name, Func        string
	RootFlag, RootEnv string
	GlobalAfter       bool
	GlobalFlags       string
	GlobalValueFlags  string // flags whose next word is their value
	GlobalDirFlags    string // value flags completed with directories
	TopCommands       []string
	Commands          []bashCommand
}

type bashCommand struct {
	Path                        string // "cache", "limit clear"
	Flags, ValueFlags, DirFlags string
	Subcommands                 []string
	Args                        string // per position: vmid, disk or -; the last one repeats when it ends in "..."
}

func hasFlag(flags []cli.Flag, name string) bool {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

// flagWords returns every spelling of the flags (--root, -h), those that
// take a value, and those whose value is a directory (names root, proc, sys,
// dir or ending in -dir).
func flagWords(flags []cli.Flag) (all, value, dir string) {
	var a, v, d []string
	for _, f := range flags {
		takes := false
		if df, ok := f.(cli.DocGenerationFlag); ok {
			takes = df.TakesValue()
		}
		isDir := false
		for _, n := range f.Names() {
			switch {
			case n == "root" || n == "proc" || n == "sys" || n == "dir" || strings.HasSuffix(n, "-dir"):
				isDir = true
			}
		}
		for _, n := range f.Names() {
			w := "--" + n
			if len(n) == 1 {
				w = "-" + n
			}
			a = append(a, w)
			if takes {
				v = append(v, w)
				if isDir {
					d = append(d, w)
				}
			}
		}
	}
	sort.Strings(a)
	return strings.Join(a, " "), strings.Join(v, " "), strings.Join(d, " ")
}

// argKinds reads ArgsUsage ("VMID [DISK...]", "[VMID...]") into one word
// per position: vmid, disk, storage or - (anything), "..." marking the last as
// repeating. It stops at the first flag some ArgsUsage spell out
// ("VMID [DISK] [--mbps-wr N ...]"): flags are completed from Flags.
func argKinds(usage string) string {
	var kinds []string
	for _, w := range strings.Fields(usage) {
		w = strings.Trim(w, "[]")
		if strings.HasPrefix(w, "-") {
			break
		}
		rep := strings.HasSuffix(w, "...")
		w = strings.TrimSuffix(w, "...")
		k := "-"
		switch w {
		case "VMID":
			k = "vmid"
		case "DISK":
			k = "disk"
		case "STORAGE":
			k = "storage"
		}
		if rep {
			k += "..."
		}
		kinds = append(kinds, k)
	}
	return strings.Join(kinds, " ")
}

var bashTemplate = template.Must(template.New("bash").Funcs(template.FuncMap{
	"join": strings.Join,
	"q":    func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" },
}).Parse(`# bash completion for {{.Name}}(8)
# Generated from {{.Name}}'s own commands and flags by '{{.Name}} gen-bash-completion'; do not edit.

{{.Func}}_root() {
    # The node root: {{if .RootFlag}}--{{.RootFlag}} on the command line, else {{end}}{{if .RootEnv}}${{.RootEnv}}, else {{end}}/.
    local i root={{if .RootEnv}}${ {{- .RootEnv}}:-/}{{else}}/{{end}}
{{- if .RootFlag}}
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
        --{{.RootFlag}}) root=${words[i + 1]} ;;
        --{{.RootFlag}}=*) root=${words[i]#--{{.RootFlag}}=} ;;
        esac
    done
{{- end}}
    printf '%s' "${root%/}"
}

{{.Func}}_vmids() {
    local f dir
    dir="$({{.Func}}_root)/etc/pve/qemu-server"
    for f in "$dir"/*.conf; do
        [[ -e $f ]] || continue
        f=${f##*/}
        printf '%s\n' "${f%.conf}"
    done
}

{{.Func}}_disks() {
    # Disk keys of the VM's current config (snapshot and pending sections skipped).
    local conf line
    conf="$({{.Func}}_root)/etc/pve/qemu-server/$1.conf"
    [[ -r $conf ]] || return
    while IFS= read -r line; do
        [[ $line == \[* ]] && break
        [[ $line =~ ^((scsi|virtio|sata|ide|efidisk|tpmstate)[0-9]+): ]] && printf '%s\n' "${BASH_REMATCH[1]}"
    done <"$conf"
}

{{.Func}}_storages() {
    # Storage IDs of storage.cfg ("lvmthin: local-lvm").
    local cfg line
    cfg="$({{.Func}}_root)/etc/pve/storage.cfg"
    [[ -r $cfg ]] || return
    while IFS= read -r line; do
        [[ $line =~ ^[a-z0-9]+:[[:space:]]+([^[:space:]]+) ]] && printf '%s\n' "${BASH_REMATCH[1]}"
    done <"$cfg"
}

{{.Func}}() {
    local cur prev words cword
    if declare -F _get_comp_words_by_ref >/dev/null; then
        _get_comp_words_by_ref -n =: -w words -i cword cur prev
    else
        words=("${COMP_WORDS[@]}") cword=$COMP_CWORD
        cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
    fi
    local global_flags={{q .GlobalFlags}}
    local global_value_flags=' {{.GlobalValueFlags}} '
    local global_dir_flags=' {{.GlobalDirFlags}} '
    local cmd="" i=1 w
    COMPREPLY=()

    # Global options, then the command and its subcommands.
    while ((i < cword)); do
        w=${words[i]}
        if [[ -z $cmd && $w == -* ]]; then
            [[ $global_value_flags == *" $w "* ]] && ((i++))
        elif [[ -z $cmd ]]; then
            cmd=$w
        else
            case "$cmd $w" in
{{- range .Commands}}{{$p := .Path}}{{range .Subcommands}}
            {{q (print $p " " .)}}) cmd="$cmd $w" ;;{{end}}{{end}}
            *) break ;;
            esac
        fi
        ((i++))
    done

    if [[ -z $cmd ]]; then
        if [[ $global_dir_flags == *" $prev "* ]]; then
            COMPREPLY=($(compgen -d -- "$cur"))
        elif [[ $global_value_flags == *" $prev "* ]]; then
            :
        elif [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "$global_flags" -- "$cur"))
        else
            COMPREPLY=($(compgen -W {{q (join .TopCommands " ")}} -- "$cur"))
        fi
        return
    fi

    local flags value_flags dir_flags subcommands args
    case $cmd in
{{- range .Commands}}
    {{q .Path}})
        flags={{q .Flags}}
        value_flags=' {{.ValueFlags}} ' dir_flags=' {{.DirFlags}} '
        subcommands={{q (join .Subcommands " ")}} args={{q .Args}} ;;
{{- end}}
    *) return ;;
    esac
{{- if .GlobalAfter}}
    flags="$flags $global_flags"
    value_flags="$value_flags$global_value_flags"
    dir_flags="$dir_flags$global_dir_flags"
{{- end}}

    if [[ $dir_flags == *" $prev "* ]]; then
        COMPREPLY=($(compgen -d -- "$cur"))
        return
    elif [[ $value_flags == *" $prev "* ]]; then
        return
    elif [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
        return
    fi

    # Positional arguments before the cursor; remember the VMID.
    local pos=0 vmid="" kind kinds=() last=""
    read -r -a kinds <<<"$args"
    ((${#kinds[@]})) && last=${kinds[${#kinds[@]} - 1]}
    for (( ; i < cword; i++)); do
        w=${words[i]}
        if [[ $w == -* ]]; then
            [[ $value_flags == *" $w "* ]] && ((i++))
            continue
        fi
        kind=${kinds[pos]:-$last}
        [[ $kind == vmid* ]] && vmid=$w
        ((pos++))
    done
    if ((pos == 0)) && [[ -n $subcommands ]]; then
        COMPREPLY=($(compgen -W "$subcommands" -- "$cur"))
    fi
    kind=${kinds[pos]:-}
    [[ -z $kind && $last == *... ]] && kind=$last
    case ${kind%...} in
    vmid) COMPREPLY+=($(compgen -W "$({{.Func}}_vmids)" -- "$cur")) ;;
    disk) [[ -n $vmid ]] && COMPREPLY+=($(compgen -W "$({{.Func}}_disks "$vmid")" -- "$cur")) ;;
    storage) COMPREPLY+=($(compgen -W "$({{.Func}}_storages)" -- "$cur")) ;;
    esac
}
complete -F {{.Func}} {{.Name}}
`))
