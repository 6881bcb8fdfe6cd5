r"""Reproduces the shape of FedSubAvg's Table 2 on Amazon Beauty: rounds to a target.
Its flags and what it runs: experiments/papers/fedsubavg_beauty.py."""

from experiments.papers import fedsubavg_beauty
from launch import common

main = fedsubavg_beauty.main

if __name__ == '__main__':
  common.run(main)
