#!/bin/bash
#SBATCH --export=NONE,KEEP=yes
#SBATCH --requeue
#SBATCH --signal=B:USR1@60
#SBATCH --comment="nightly"
#CORPUS args: --nice=5 --qos=normal
#CORPUS expect: ^keep=yes secret=$
echo "keep=${KEEP:-} secret=${CORPUS_SECRET:-}"
