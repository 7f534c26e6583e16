#!/bin/sh
#SBATCH -J train
#SBATCH -o train.log
#SBATCH --kill-on-invalid-dep=yes
#CORPUS after: chain-prep.sh
#CORPUS output: train.log
#CORPUS expect: ^sum=6$
set -e
sum=0
for n in $(cat data/input.txt); do sum=$((sum + n)); done
echo "sum=$sum"
