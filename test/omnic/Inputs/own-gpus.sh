#!/bin/sh
# own-gpus.sh N CMD...: runs CMD with CUDA_VISIBLE_DEVICES naming this
# process's own N GPUs of its host (local rank k: k N .. k N + N - 1), as a
# launcher that gives each process its own GPUs does (SLURM's
# --gpus-per-task, for one). OpenMPI's mpirun says the local rank.
n=$1
shift
k=${OMPI_COMM_WORLD_LOCAL_RANK:-0}
list=""
i=0
while [ "$i" -lt "$n" ]; do
  list="$list${list:+,}$((k * n + i))"
  i=$((i + 1))
done
CUDA_VISIBLE_DEVICES=$list exec "$@"
