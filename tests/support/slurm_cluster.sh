#!/usr/bin/env bash
# slurm_cluster.sh -- a private two-node Slurm cluster on localhost for the Slurm executor tests.
#
# Usage:
#   slurm_cluster.sh start  <dir>   start (or reuse) the cluster whose files live under <dir>
#   slurm_cluster.sh stop   <dir>   cancel its jobs and stop its daemons; exit 0 even if none ran
#   slurm_cluster.sh status <dir>   exit 0 if healthy (daemons alive, sinfo answers, n1+n2 up), else 1
#
# start prints on stdout, one per line, what a client needs in its environment; today that is only
#   export SLURM_CONF=<dir>/slurm.conf
# (slurm.conf carries AuthInfo=socket=... naming the private munge socket, so sbatch, squeue,
# scancel, srun, sinfo and scontrol need nothing else). A caller can `eval "$(slurm_cluster.sh
# start DIR)"`. start is idempotent: when the cluster from <dir> is already healthy it only prints
# the exports. Exit status of start: 0 ready; 77 (ctest SKIP_RETURN_CODE) when the cluster cannot run
# here for an environmental reason: not root, munge/slurm binaries missing, daemons do not come up
# (one "SKIP: reason" line on stderr, then the tails of the daemon logs); 2 usage error.
#
# Layout under <dir>: slurm.conf gres.conf, munge/ (key, pid, seed, log), munge.socket, state/,
# spool-n1/ spool-n2/, log/, run/ (pid files), dev/n{1,2}gpu{0,1} (fake GPUs: `mknod c 1 3`, i.e.
# /dev/null, or a symlink to /dev/null where mknod is not allowed). Unix socket paths are limited to
# 107 bytes, so when <dir> is long the munge socket and the slurmd spool directories (slurmstepd binds
# sockets there) go to /tmp/ens-slurm.<hash of dir> instead; <dir>/runtime_dir names it, and stop
# removes it.
#
# Recipe (Debian 12: slurm-wlm 22.05.8, munge 0.5.15; must run as root):
#  - munged --force --socket=<dir>/munge.socket --key-file=... --pid-file=... --seed-file=...
#    --log-file=... with a fresh random key. --force lets it run as root from a directory that is not
#    world-executable (a clone under /root); without it munged insists on o+x for the socket dir.
#  - slurm.conf: ClusterName=ens-test, SlurmctldHost=localhost(127.0.0.1), private ports (derived
#    from a hash of <dir>, 20000-39999, checked free), AuthType=auth/munge with
#    AuthInfo=socket=<sock> (used by auth/munge and cred/munge alike), SlurmUser=root,
#    ProctrackType=proctrack/linuxproc, TaskPlugin=task/none (no cgroup.conf needed),
#    SelectType=select/cons_tres + CR_Core_Memory with DefMemPerCPU (else a job without --mem takes a
#    whole node's memory and GPU jobs cannot share a node), GresTypes=gpu, accounting off,
#    SlurmdParameters=config_overrides (nodes may declare more CPUs than the machine has),
#    short timeouts (KillWait=2, ReturnToService=2, ...), SchedulerParameters=batch_sched_delay=0,
#    bf_interval=1 (sbatch -> RUNNING in 0-1 s: slurmctld schedules on a 1 s tick; the default delay
#    is 3 s; a job queued behind a pending one it does not compete with waits for backfill, 30 s by
#    default). Nodes n1 and n2, both NodeAddr=127.0.0.1
#    with their own Port, CPUs=max(nproc,4), Gres=gpu:2. Partitions: debug (default) and gpu, both
#    on n1,n2.
#  - slurmctld -f <conf>; slurmd -N n1 -f <conf>; slurmd -N n2 -f <conf>. Every daemon runs with
#    stdin/stdout/stderr on files and every other inherited descriptor closed, so ctest (which waits
#    for the test's pipes to close) never hangs on them.
#  - Daemons are stopped only through their pid files, and only after /proc/<pid>/cmdline shows the
#    socket or slurm.conf of <dir>: the script never signals a daemon it did not start.
#  - stop: scancel every job, wait (<= 15 s) for the queue to empty, SIGTERM the four daemons
#    together (each takes 1-2 s; SIGKILL after 10 s), then SIGKILL any slurmstepd still holding a
#    socket in this cluster's spool directories (jobs that could not be cancelled, e.g. slurmctld
#    had died) together with its job processes. Typically 2-3.5 s.
#  - With accounting off there is no sacct: a finished job stays visible to `scontrol show job` and
#    `squeue --states=all` for MinJobAge seconds (300).
set -uo pipefail

SKIP=77
PROG=${0##*/}

usage() { echo "usage: $PROG start|stop|status <dir>" >&2; exit 2; }
note() { echo "$PROG: $*" >&2; }

(($# == 2)) || usage
PATH=$PATH:/usr/sbin:/sbin # munged, slurmctld, slurmd
CMD=$1
DIR_ARG=$2
[[ $CMD == start || $CMD == stop || $CMD == status ]] || usage
[[ -n $DIR_ARG && $DIR_ARG != *[[:space:]]* && $DIR_ARG != *[\'\"\\\$\`\;\&\|\<\>\(\)\*\?\[\]#=,]* ]] \
  || { note "directory name must be non-empty, with no spaces or shell/slurm.conf special characters: '$DIR_ARG'"; exit 2; }

# ---------------------------------------------------------------------------------------------------
# paths

set_paths() { # $1: absolute dir
  DIR=$1
  CONF=$DIR/slurm.conf
  GRES_CONF=$DIR/gres.conf
  LOGDIR=$DIR/log
  RUNDIR=$DIR/run
  STATEDIR=$DIR/state
  DEVDIR=$DIR/dev
  MUNGEDIR=$DIR/munge
  MUNGE_KEY=$MUNGEDIR/munge.key
  MUNGE_PID=$MUNGEDIR/munged.pid
  MUNGE_SEED=$MUNGEDIR/munged.seed
  MUNGE_LOG=$LOGDIR/munged.log
  CTLD_PID=$RUNDIR/slurmctld.pid
  CTLD_LOG=$LOGDIR/slurmctld.log
  HASH=$(printf '%s' "$DIR" | cksum | cut -d' ' -f1)
  # Short directory for Unix sockets when <dir> is long (sun_path holds 107 bytes; slurmstepd binds
  # <spool>/<node>_<job>.<step> in SlurmdSpoolDir).
  if ((${#DIR} > 60)); then
    RT=/tmp/ens-slurm.$HASH
  else
    RT=$DIR
  fi
  MUNGE_SOCK=$RT/munge.socket
}

slurmd_pidfile() { echo "$RUNDIR/slurmd-$1.pid"; }
slurmd_log() { echo "$LOGDIR/slurmd-$1.log"; }
NODES=(n1 n2)

# ---------------------------------------------------------------------------------------------------
# process helpers: only ever signal a pid whose command line names this cluster's files

# pid_from <pidfile> <pattern>: print the pid if alive and its cmdline contains <pattern>
pid_from() {
  local f=$1 pat=$2 pid cmdline
  [[ -r $f ]] || return 1
  pid=$(tr -dc '0-9' <"$f" 2>/dev/null)
  [[ -n $pid && -r /proc/$pid/cmdline ]] || return 1
  cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ $cmdline == *"$pat"* ]] || return 1
  echo "$pid"
}

munged_pid() { pid_from "$MUNGE_PID" "--socket=$MUNGE_SOCK"; }
ctld_pid() { pid_from "$CTLD_PID" "-f $CONF"; }
slurmd_pid() { pid_from "$(slurmd_pidfile "$1")" "-N $1 -f $CONF"; }

# stop_pids <what> <pid...>: SIGTERM them all, wait up to 10 s for all to exit, then SIGKILL
stop_pids() {
  local what=$1 i p left
  shift
  (($#)) || return 0
  kill -TERM "$@" 2>/dev/null
  for ((i = 0; i < 100; i++)); do
    left=()
    for p in "$@"; do kill -0 "$p" 2>/dev/null && left+=("$p"); done
    ((${#left[@]})) || return 0
    sleep 0.1
  done
  note "$what (pid ${left[*]}) ignored SIGTERM for 10 s; sending SIGKILL"
  kill -KILL "${left[@]}" 2>/dev/null
  sleep 0.2
}

# launch <log> <cmd...>: run a self-daemonizing command with stdio on files and every other
# descriptor closed (ctest pipes, flock descriptors) in a new session.
launch() {
  local log=$1
  shift
  (
    for fd in /proc/self/fd/*; do
      fd=${fd##*/}
      [[ $fd =~ ^[0-9]+$ ]] && ((fd > 2)) && { eval "exec $fd>&-"; } 2>/dev/null
    done
    exec setsid "$@"
  ) </dev/null >>"$log" 2>&1
}

# descendants <pid...>: print the pids and all their descendants
descendants() {
  ps -e -o pid= -o ppid= 2>/dev/null | awk -v roots="$*" '
    { kids[$2] = kids[$2] " " $1 }
    END {
      n = split(roots, q, " ")
      for (i = 1; i <= n; i++) {
        print q[i]
        m = split(kids[q[i]], k, " ")
        for (j = 1; j <= m; j++) q[++n] = k[j]
      }
    }'
}

# slurmstepd processes that hold a Unix socket inside this cluster's spool directories. They outlive
# slurmd; stop kills them (and their job processes) when jobs could not be cancelled normally.
our_stepds() {
  local inodes pid fd link
  inodes=$(awk -v a="$RT/spool-n1/" -v b="$RT/spool-n2/" \
    'index($8, a) == 1 || index($8, b) == 1 { print $7 }' /proc/net/unix 2>/dev/null | sort -u)
  [[ -n $inodes ]] || return 0
  for pid in $(pgrep -x slurmstepd 2>/dev/null); do
    for fd in /proc/"$pid"/fd/*; do
      link=$(readlink "$fd" 2>/dev/null) || continue
      [[ $link =~ ^socket:\[([0-9]+)\]$ ]] || continue
      if grep -qx "${BASH_REMATCH[1]}" <<<"$inodes"; then
        echo "$pid"
        break
      fi
    done
  done
}

# ---------------------------------------------------------------------------------------------------
# health

slurm_cmd() { SLURM_CONF=$CONF timeout 15 "$@"; }

# node_states: "n1 idle" lines (sorted, unique) from sinfo
node_states() {
  slurm_cmd sinfo -h -N -o '%N %T' 2>/dev/null | sort -u
}

nodes_up() {
  local states n
  states=$(node_states) || return 1
  for n in "${NODES[@]}"; do
    grep -Eqx "$n (idle|mixed|allocated|completing)" <<<"$states" || return 1
  done
}

healthy() {
  [[ -r $CONF ]] || return 1
  munged_pid >/dev/null && ctld_pid >/dev/null || return 1
  local n
  for n in "${NODES[@]}"; do slurmd_pid "$n" >/dev/null || return 1; done
  nodes_up
}

print_exports() {
  echo "export SLURM_CONF=$CONF"
}

# ---------------------------------------------------------------------------------------------------
# stop

do_stop() {
  local pid n i ids
  [[ -d $DIR ]] || return 0
  # 1. cancel every job while slurmctld is still there, wait for them to leave the queue
  if ctld_pid >/dev/null && [[ -r $CONF ]]; then
    ids=$(slurm_cmd squeue -h -o '%i' 2>/dev/null | tr '\n' ' ')
    if [[ -n ${ids// /} ]]; then
      # shellcheck disable=SC2086
      slurm_cmd scancel $ids >/dev/null 2>&1
      for ((i = 0; i < 150; i++)); do
        ids=$(slurm_cmd squeue -h -o '%i' 2>/dev/null) || break
        [[ -z $ids ]] && break
        sleep 0.1
      done
      [[ -n ${ids:-} ]] && note "jobs still queued after scancel: ${ids//$'\n'/ }"
    fi
  fi
  # 2. the daemons, all at once (each takes 1-2 s to exit after SIGTERM; none needs another to stop)
  local pids=()
  for n in "${NODES[@]}"; do
    pid=$(slurmd_pid "$n") && pids+=("$pid")
  done
  pid=$(ctld_pid) && pids+=("$pid")
  pid=$(munged_pid) && pids+=("$pid")
  stop_pids "daemons" "${pids[@]}"
  # 3. slurmstepd left behind (jobs that could not be cancelled), with their job processes
  # (none are left when the jobs were cancelled above: a job leaves squeue only after its steps end)
  for ((i = 0; i < 10; i++)); do
    pid=$(our_stepds)
    [[ -z $pid ]] && break
    if ((i == 9)); then
      note "killing leftover slurmstepd and their processes: ${pid//$'\n'/ }"
      # shellcheck disable=SC2046,SC2086
      kill -KILL $(descendants $pid) 2>/dev/null
    fi
    sleep 0.1
  done
  rm -f "$MUNGE_SOCK" "$MUNGE_SOCK.lock"
  if [[ $RT != "$DIR" && -d $RT && $RT == /tmp/ens-slurm.* ]]; then
    rm -rf "$RT"
  fi
  return 0
}

# ---------------------------------------------------------------------------------------------------
# start

skip() { # reason
  echo "SKIP: $*" >&2
  local f
  for f in "$MUNGE_LOG" "$CTLD_LOG" "$(slurmd_log n1)" "$(slurmd_log n2)" "$LOGDIR"/*.stdout; do
    [[ -s $f ]] || continue
    echo "---- tail of $f" >&2
    tail -n 15 "$f" >&2
  done
  do_stop
  exit $SKIP
}

port_free() {
  local p=$1
  if command -v ss >/dev/null 2>&1; then
    [[ -z $(ss -Htan "( sport = :$p )" 2>/dev/null) ]]
  else
    ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null
  fi
}

pick_ports() { # sets CTLD_PORT N1_PORT N2_PORT
  local base i p ok
  base=$((20000 + (HASH % 6666) * 3))
  for ((i = 0; i < 200; i++)); do
    p=$((20000 + ((base - 20000 + i * 3) % 19998)))
    ok=1
    port_free "$p" && port_free $((p + 1)) && port_free $((p + 2)) || ok=0
    if ((ok)); then
      CTLD_PORT=$p N1_PORT=$((p + 1)) N2_PORT=$((p + 2))
      return 0
    fi
  done
  return 1
}

make_fake_gpu() { # path
  rm -f "$1"
  mknod "$1" c 1 3 2>/dev/null || ln -s /dev/null "$1"
}

write_config() {
  local cpus mem_mb node_mem n
  cpus=$(nproc 2>/dev/null || echo 1)
  ((cpus < 4)) && cpus=4
  mem_mb=$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo)
  node_mem=$((mem_mb / 4))
  ((node_mem > 16384)) && node_mem=16384
  ((node_mem < 1024)) && node_mem=1024

  cat >"$CONF" <<EOF
# Generated by tests/support/slurm_cluster.sh -- private test cluster, do not edit.
ClusterName=ens-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCK
StateSaveLocation=$STATEDIR
SlurmdSpoolDir=$RT/spool-%n
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$RUNDIR/slurmd-%n.pid
SlurmctldLogFile=$CTLD_LOG
SlurmdLogFile=$LOGDIR/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$DIR/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=100
GresTypes=gpu
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
# batch_sched_delay=0: schedule a submitted batch job at slurmctld's next 1 s tick (default: 3 s).
# bf_interval=1: run backfill every second (default 30 s); the main scheduler stops at the first job
# of a partition that cannot start, so a CPU-only job queued behind a pending GPU job starts only
# through backfill.
SchedulerParameters=batch_sched_delay=0,bf_interval=1
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SlurmctldTimeout=10
SlurmdTimeout=30
MessageTimeout=10
KillWait=2
InactiveLimit=0
Waittime=0
MinJobAge=300
ReturnToService=2
NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$N1_PORT CPUs=$cpus RealMemory=$node_mem Gres=gpu:2 State=UNKNOWN
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$N2_PORT CPUs=$cpus RealMemory=$node_mem Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=n1,n2 Default=NO MaxTime=INFINITE State=UP
EOF
  : >"$GRES_CONF"
  for n in "${NODES[@]}"; do
    make_fake_gpu "$DEVDIR/${n}gpu0" && make_fake_gpu "$DEVDIR/${n}gpu1" || return 1
    echo "NodeName=$n Name=gpu File=$DEVDIR/${n}gpu[0-1]" >>"$GRES_CONF"
  done
  # an empty SPANK stack: do not pick up plugins configured for the host's own Slurm
  : >"$DIR/plugstack.conf"
}

# wait_for <seconds> <command...>
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  while ! "$@"; do
    ((SECONDS >= deadline)) && return 1
    sleep 0.2
  done
}

munge_ok() { munge -n --socket="$MUNGE_SOCK" 2>/dev/null | unmunge --socket="$MUNGE_SOCK" >/dev/null 2>&1; }
ctld_ok() { ctld_pid >/dev/null && slurm_cmd scontrol ping 2>/dev/null | grep -q 'is UP'; }

preflight() {
  local b missing=()
  [[ $(id -u) == 0 ]] || { echo "SKIP: $PROG must run as root (slurmd needs it to start jobs)" >&2; exit $SKIP; }
  for b in munged munge unmunge slurmctld slurmd sinfo squeue sbatch scancel srun scontrol; do
    command -v "$b" >/dev/null 2>&1 || missing+=("$b")
  done
  ((${#missing[@]} == 0)) \
    || { echo "SKIP: not installed: ${missing[*]} (Debian: apt-get install slurm-wlm munge)" >&2; exit $SKIP; }
}

do_start() {
  local n
  if healthy; then
    print_exports
    return 0
  fi
  do_stop # whatever is left from an earlier, broken run of this <dir>

  rm -rf "$STATEDIR" "$RUNDIR" "$LOGDIR" "$MUNGEDIR" "$DEVDIR" "$RT/spool-n1" "$RT/spool-n2"
  mkdir -p "$STATEDIR" "$RUNDIR" "$LOGDIR" "$MUNGEDIR" "$DEVDIR" "$RT/spool-n1" "$RT/spool-n2" \
    || skip "cannot create directories under $DIR"
  chmod 700 "$MUNGEDIR"
  chmod 755 "$RT"
  echo "$RT" >"$DIR/runtime_dir"

  pick_ports || skip "no three free TCP ports found in 20000-39999"
  write_config || skip "cannot create fake GPU devices in $DEVDIR"

  # munge
  (umask 077 && head -c 1024 /dev/urandom >"$MUNGE_KEY") || skip "cannot write $MUNGE_KEY"
  chmod 400 "$MUNGE_KEY"
  launch "$MUNGE_LOG.stdout" munged --force --socket="$MUNGE_SOCK" --key-file="$MUNGE_KEY" \
    --pid-file="$MUNGE_PID" --seed-file="$MUNGE_SEED" --log-file="$MUNGE_LOG" --num-threads=4 \
    || skip "munged failed to start: $(tail -n 3 "$MUNGE_LOG.stdout" 2>/dev/null | tr '\n' ' ')"
  wait_for 10 munge_ok || skip "munged does not answer on $MUNGE_SOCK"

  # slurmctld, then the two slurmd
  launch "$CTLD_LOG.stdout" slurmctld -f "$CONF" || skip "slurmctld failed to start"
  wait_for 20 ctld_ok || skip "slurmctld does not answer (scontrol ping)"
  for n in "${NODES[@]}"; do
    launch "$(slurmd_log "$n").stdout" slurmd -N "$n" -f "$CONF" || skip "slurmd $n failed to start"
  done
  wait_for 30 nodes_up || skip "nodes n1, n2 not idle after 30 s: $(node_states | tr '\n' ';')"
  for n in "${NODES[@]}"; do slurmd_pid "$n" >/dev/null || skip "slurmd $n exited"; done
  print_exports
}

# ---------------------------------------------------------------------------------------------------

case $CMD in
start)
  preflight
  mkdir -p "$DIR_ARG" 2>/dev/null || { echo "SKIP: cannot create $DIR_ARG" >&2; exit $SKIP; }
  set_paths "$(cd "$DIR_ARG" && pwd -P)"
  exec 9>"$DIR/.lock"
  flock -w 120 9 || { note "timed out waiting for the lock on $DIR"; exit 1; }
  do_start
  ;;
stop)
  [[ -d $DIR_ARG ]] || exit 0
  set_paths "$(cd "$DIR_ARG" && pwd -P)"
  exec 9>"$DIR/.lock"
  flock -w 120 9 || note "timed out waiting for the lock on $DIR; stopping anyway"
  do_stop
  exit 0
  ;;
status)
  [[ -d $DIR_ARG ]] || exit 1
  set_paths "$(cd "$DIR_ARG" && pwd -P)"
  healthy
  ;;
esac
