#!/bin/sh
# edit.sh — edit sandbox files with an editor, scripted: ed and vim work on
# ID/workspace/ like on any directory (vim saves through a backup and a
# rename; ed rewrites in place), and the sandbox's commands see the edits.
#
#   mkdir -p ~/sbx && sandboxfs --local ~/sbx
#   examples/edit.sh ~/sbx
#   fusermount3 -u ~/sbx
#
# By hand it is just: vim ~/sbx/ID/workspace/app.conf
set -eu
M=${1:?usage: edit.sh MOUNTPOINT [SANDBOX_ID]}
S=$M/${2:-editor}
[ -d "$S" ] || mkdir "$S"
W=$S/workspace

printf 'name = demo\nport = 8080\ndebug = false\n' > "$W/app.conf"

# ed: change the port, append a line, write, quit
ed -s "$W/app.conf" <<'ED'
/^port/s/8080/9090/
$a
workers = 4
.
w
q
ED

# vim in Ex mode (vim.tiny or vim): turn debug on and save
if command -v vim >/dev/null 2>&1; then
	vim -N -u NONE -i NONE -es -c '%s/^debug = false/debug = true/' -c 'wq' "$W/app.conf"
else
	ed -s "$W/app.conf" <<'ED'
,s/^debug = false/debug = true/
w
q
ED
fi

# the sandbox sees the edited file
echo 'cat app.conf; grep -c = app.conf' > "$S/ctl"
cat "$S/stdout"
