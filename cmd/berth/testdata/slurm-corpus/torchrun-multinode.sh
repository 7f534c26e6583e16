#!/bin/bash
#SBATCH --job-name=ddp-train
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=4
#SBATCH --cpus-per-task=8
#SBATCH --mem=8G
#SBATCH --time=00:10:00
#SBATCH --output=%x-%j.out
#CORPUS output: ddp-train-%j.out
#CORPUS expect: ^master=co-n[12]$
#CORPUS expect: ^torchrun node_rank=0 nnodes=2 nproc=4 master=\S+:29500 gpus=0,1,2,3$
#CORPUS expect: ^torchrun node_rank=1 nnodes=2 nproc=4 master=\S+:29500 gpus=0,1,2,3$

set -euo pipefail
nodes=( $(scontrol show hostnames "$SLURM_JOB_NODELIST") )
head_node=${nodes[0]}
export MASTER_ADDR=$head_node
export MASTER_PORT=29500
echo "master=$MASTER_ADDR"

srun torchrun \
    --nnodes "$SLURM_NNODES" \
    --nproc_per_node 4 \
    --rdzv_id "$SLURM_JOB_ID" \
    --rdzv_backend c10d \
    --rdzv_endpoint "$MASTER_ADDR:$MASTER_PORT" \
    train.py --epochs 1
