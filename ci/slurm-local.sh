#!/bin/sh
# ci/slurm-local.sh CMD...: runs CMD (srun ...) against a private one-node
# Slurm cluster started for it and torn down after: slurmctld and slurmd in
# the foreground on random ports, state, spool and logs in a temporary
# directory, no munge (auth/none, cred/none: the daemons and CMD are this
# machine's root), MpiDefault=pmix so that srun's tasks find their rank,
# size and peers through PMIx, as on a site's cluster. The node claims 4
# CPUs and the partition oversubscribes, so a 4-rank job fits a 2-vCPU VM.
# TmpFS is private too: the PMIx plugin makes its per-step directory there
# (spmix_appdir_<uid>_<job>.<step>), and since every fresh cluster numbers
# its first job 1, a directory left in /tmp by a run that was killed would
# fail every later run's tasks with "launch failed: Unspecified error".
# Needs slurmctld, slurmd and slurm-client (mk/fabric.mk installs them).
set -eu
D=$(mktemp -d /tmp/knemesis-slurm.XXXXXX)
P=$((20000 + $(od -An -N2 -tu2 /dev/urandom) % 20000))
H=$(hostname -s)
mkdir -p "$D/state" "$D/spool" "$D/tmp"
cat > "$D/slurm.conf" <<CONF
ClusterName=knemesis
SlurmctldHost=$H
SlurmctldPort=$P
SlurmdPort=$((P + 1))
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
TmpFS=$D/tmp
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/slurmctld.log
SlurmdLogFile=$D/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
ReturnToService=2
SlurmdParameters=config_overrides
NodeName=$H CPUs=4 State=UNKNOWN
PartitionName=debug Nodes=$H Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
CONF
export SLURM_CONF="$D/slurm.conf"
slurmctld -D -f "$SLURM_CONF" >/dev/null 2>&1 &
ctld=$!
slurmd -D -f "$SLURM_CONF" >/dev/null 2>&1 &
d=$!
trap 'kill $d $ctld 2>/dev/null; wait $d $ctld 2>/dev/null; rm -rf "$D"' EXIT INT TERM
i=0
until sinfo -h -o %T 2>/dev/null | grep -q idle; do
	i=$((i + 1))
	if [ $i -gt 100 ]; then
		echo "slurm-local: the node did not come up in 20 s; slurmctld and slurmd logs:" >&2
		cat "$D/slurmctld.log" "$D/slurmd.log" >&2 2>/dev/null || true
		exit 1
	fi
	sleep 0.2
done
"$@" || { rc=$?; echo "slurm-local: $1 failed (exit $rc); slurmctld and slurmd logs:" >&2; cat "$D/slurmctld.log" "$D/slurmd.log" >&2 2>/dev/null || true; exit $rc; }
