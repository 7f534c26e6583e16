#!/bin/bash
#SBATCH --job-name=het
#SBATCH -N 1 -c 2
#SBATCH hetjob
#SBATCH -N 1 -c 1
#CORPUS expect: ^het component 0$
echo "het component ${SLURM_JOB_COMPONENT_ID:-?}"
