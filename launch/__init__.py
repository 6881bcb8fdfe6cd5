"""The command-line launchers. TensorFlow, whenever they load it, loads quietly
(quiet_start)."""

from launch import quiet_start

quiet_start.install()
