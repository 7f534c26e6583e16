#!/bin/bash
#SBATCH --job-name=sweep
#SBATCH --array=0-9%3
#SBATCH --cpus-per-task=1
#SBATCH --time=2
#SBATCH --output=sweep_%A_%a.out
#CORPUS output: sweep_%j_7.out
#CORPUS expect: ^task 7 of 10 \(0-9\) lr=0\.0008$

lrs=(0.0001 0.0002 0.0003 0.0004 0.0005 0.0006 0.0007 0.0008 0.0009 0.001)
echo "task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_TASK_COUNT ($SLURM_ARRAY_TASK_MIN-$SLURM_ARRAY_TASK_MAX) lr=${lrs[$SLURM_ARRAY_TASK_ID]}"
