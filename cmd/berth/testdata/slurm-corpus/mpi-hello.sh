#!/bin/bash
#SBATCH -J mpi_hello
#SBATCH -N 2
#SBATCH --ntasks-per-node=2
#SBATCH -c 1
#SBATCH --mem-per-cpu=500M
#SBATCH -t 5:00
#CORPUS expect: ^hello from rank 0 of 4$
#CORPUS expect: ^hello from rank 1 of 4$
#CORPUS expect: ^hello from rank 2 of 4$
#CORPUS expect: ^hello from rank 3 of 4$
#CORPUS expect: ^ran on 2 nodes: 2\(x2\) tasks$

echo "ran on $SLURM_JOB_NUM_NODES nodes: $SLURM_TASKS_PER_NODE tasks"
srun mpi_hello
