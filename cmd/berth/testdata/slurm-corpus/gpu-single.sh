#!/bin/bash
#SBATCH --gres=gpu:2
#SBATCH -c 4
#SBATCH --mem=4G
#SBATCH -p berth
#SBATCH --open-mode=append
#SBATCH -e gpu-%j.err
#CORPUS expect: ^gpus=\d,\d cpus=4 mem=4096$
echo "gpus=$CUDA_VISIBLE_DEVICES cpus=$SLURM_CPUS_ON_NODE mem=$SLURM_MEM_PER_NODE"
