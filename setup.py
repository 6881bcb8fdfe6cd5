"""tff_rec: federated recommendation research on TensorFlow Federated.

Install with `make setup`, which installs the pinned lock file
(requirements.txt) with --no-deps and then this package. Why not plain
`pip install .`: tensorflow-federated 0.87.0 declares jax/jaxlib 0.4.14, which
the registry does not serve, so its dependencies cannot be resolved; the lock
file lists every package instead. `install_requires` names the direct
dependencies other than TFF so that tools that read it see them. Building
the package also builds the hashed embedding op library (tff_rec.ops.build).
"""
import pathlib
import re

import setuptools
from setuptools.command import build_py

_DIRECT = ('tensorflow', 'tensorflow-recommenders', 'numpy', 'pandas', 'absl-py',
           'matplotlib', 'psutil')


def _pinned(names):
  lock = pathlib.Path(__file__).with_name('requirements.txt').read_text()
  pins = dict(re.findall(r'^([A-Za-z0-9_.-]+)==(\S+)$', lock, re.M))
  return [f'{n}=={pins[n]}' for n in names]


class BuildPyWithOps(build_py.build_py):
  """Also builds the hashed embedding op library into the package."""

  def run(self):
    super().run()
    import subprocess  # pylint: disable=g-import-not-at-top
    import sys  # pylint: disable=g-import-not-at-top
    subprocess.run([sys.executable, '-m', 'tff_rec.ops.build'], check=True,
                   cwd=pathlib.Path(__file__).parent)
    for library in pathlib.Path(__file__).parent.glob('tff_rec/ops/*.so'):
      self.copy_file(str(library), str(pathlib.Path(self.build_lib) / 'tff_rec/ops' /
                                       library.name))


setuptools.setup(
    name='tff_rec',
    version='0.1.0',
    description='Federated recommendation research on TensorFlow Federated',
    python_requires='>=3.11,<3.12',
    packages=setuptools.find_packages(include=['tff_rec*', 'tasks*', 'experiments*', 'launch*']),
    install_requires=_pinned(_DIRECT),
    package_data={'tff_rec.ops': ['cc/*']},
    cmdclass={'build_py': BuildPyWithOps},
)
