r"""Reproduces the shape of MetaUA's Tables 2, 3 and 4 on MovieLens CTR (AUC, logloss).
Its flags and what it runs: experiments/papers/metaua.py."""

from experiments.papers import metaua
from launch import common

main = metaua.main

if __name__ == '__main__':
  common.run(main)
