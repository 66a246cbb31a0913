# Runs a batch of programs in a program sandbox, one after the other, each as its own process,
# and removes every trace of each before the next (run as root by
# raydist.problems.execute.ProgramRunner, one exec per batch).
#
# usage: bash run_program.sh UID WALL_S CPU_S AS_BYTES NPROC FSIZE_BYTES KEEP_BYTES COUNT
#
# Program i (the JSON that program_runner.py reads) comes in $RAYDIST_PROGRAM_<i>, or as
# /opt/raydist/incoming/<i>.json when it is too large for the environment; its secret in
# $RAYDIST_SECRET_<i>. $RAYDIST_MARK and the secrets are tokens the programs cannot read
# (they run as another uid, and a root process's environment is private to root). A program
# gets its secret on fd 0 and its JSON on fd 4 (the runner reads and closes both before any
# program code runs: neither the tests nor the secret are files it can open) and a
# write-only proof file, in a root-only directory, on fd 3. For program i the script prints
# "<mark>:begin:<i>", the last KEEP_BYTES of the program's merged stdout/stderr, then
# "<mark>:end:<i> rc= real= user= sys= oom= left= proof=" (proof: the file's first line,
# only its [0-9a-f:] characters). It stops early (exit 3) when it cannot prepare a program or
# when a process of the uid survives the clean-up.
set -u
umask 077
uid=$1 wall=$2 cpu=$3 as=$4 nproc=$5 fsize=$6 keep=$7 count=$8
mark=$RAYDIST_MARK
unset RAYDIST_MARK
# The grading environment the exec was given (raydist.grading.environment.GRADING_ENV).
grading_env=(TZ="$TZ" PYTHONHASHSEED="$PYTHONHASHSEED" LC_ALL="$LC_ALL" LANG="$LANG")
home=/tmp/program work=/tmp/harness incoming=/opt/raydist/incoming
out=$work/out times=$work/times proof=$work/proof
TIMEFORMAT='%R %U %S'

oom_kills() {  # sets $oom to the container's OOM-kill counter (cgroup v2, else v1)
    local file key value
    oom=0
    for file in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do
        [ -r "$file" ] || continue
        while read -r key value; do
            if [ "$key" = oom_kill ]; then oom=$value; return; fi
        done <"$file"
    done
}

queue_programs() {  # into $work/<i>.json, root-only until their turn
    local i var
    rm -rf "$work" && mkdir -m 0700 "$work" || return 1
    for ((i = 0; i < count; i++)); do
        var=RAYDIST_PROGRAM_$i
        if [ -n "${!var+set}" ]; then
            printf '%s' "${!var}" >"$work/$i.json" || return 1
            unset "$var"
        else
            mv "$incoming/$i.json" "$work/$i.json" || return 1
        fi
        var=RAYDIST_SECRET_$i
        secrets[i]=${!var}
        unset "$var"
    done
}

run_one() {
    local i=$1 rc left=0 oom_before line="" real=0 user=0 sys=0 n seen=""
    rm -rf "$home" && install -d -m 0700 -o "$uid" -g "$uid" "$home" && : >"$proof" || return 1
    oom_kills
    oom_before=$oom
    cd "$home" || return 1
    # prlimit sets the limits, setpriv drops to the program's uid for good (no supplementary
    # groups, no gaining privileges through setuid binaries), env -i passes nothing of this
    # environment on but the grading environment (raydist.grading.environment: TZ, the hash
    # seed, the locale). Python runs as -I does but reads PYTHONHASHSEED: env -i leaves it the
    # only PYTHON* variable, -s drops the user site, -P the script's directory. timeout TERMs
    # the process group at WALL_S and KILLs it 1 s later; the CPU limit sends SIGXCPU at CPU_S
    # and SIGKILL one CPU second later.
    { time timeout -k 1 "$wall" \
        prlimit --cpu="$cpu:$((cpu + 1))" --as="$as" --nproc="$nproc" --fsize="$fsize" --core=0 -- \
        setpriv --reuid="$uid" --regid="$uid" --clear-groups --no-new-privs -- \
        env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" TMPDIR="$home" "${grading_env[@]}" \
        python3 -s -P -B /opt/raydist/program_runner.py "$home/program.py" \
        <<<"${secrets[i]}" >"$out" 2>&1 3>"$proof" 4<"$work/$i.json"
    } 2>"$times"
    rc=$?
    cd / || return 1
    # Whatever the program left behind (background or detached children, a fork loop still
    # spawning) dies here; killed processes stay visible until init reaps them, hence the loop.
    if pkill -9 -u "$uid"; then
        for ((n = 0; n < 500; n++)); do pkill -9 -u "$uid" || break; done
        left=$(pgrep -u "$uid" | wc -l)
    fi
    rm -rf "$home" "$work/$i.json"
    IFS= read -r -N 200 seen <"$proof"
    seen=${seen//[^0-9a-f:]/}
    while read -r n; do line=$n; done <"$times"  # the last line is `time`'s
    read -r real user sys <<<"$line"
    oom_kills
    printf '%s:begin:%d\n' "$mark" "$i"
    tail -c "$keep" "$out"
    printf '\n%s:end:%d rc=%d real=%s user=%s sys=%s oom=%d left=%d proof=%s\n' "$mark" "$i" "$rc" \
        "${real:-0}" "${user:-0}" "${sys:-0}" "$((oom - oom_before))" "$left" "$seen"
    [ "$left" -eq 0 ]
}

declare -a secrets
queue_programs || exit 3
for ((i = 0; i < count; i++)); do
    run_one "$i" || exit 3
done
rm -rf "$work"
