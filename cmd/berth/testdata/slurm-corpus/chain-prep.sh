#!/bin/sh
#SBATCH -J prep
#SBATCH -o prep.log
#CORPUS output: prep.log
#CORPUS expect: ^prepared$
mkdir -p data
echo 1 2 3 > data/input.txt
echo prepared
