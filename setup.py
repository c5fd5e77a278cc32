"""Builds the `terra` Python package for pip: CMake builds libterra and the extension terra._terra,
`cmake --install` stages them (the install step gives the extension its RPATH, $ORIGIN first), and
the wheel holds the pure-Python package (python/terra), _terra*.so and libterra.so.0 side by side,
so the extension finds libterra in site-packages with no LD_LIBRARY_PATH.

Environment:
  TERRA_CMAKE_BUILD_DIR  CMake build folder to build in and stage from (default build/pip/cmake). An
                         existing configured folder is reused as it is (only TERRA_BUILD_PYTHON is
                         switched on), so CI can package what it already built.
  TERRA_JOBS             parallel compile jobs (default: CMAKE_BUILD_PARALLEL_LEVEL, else the CPUs)
  TERRA_CMAKE_ARGS       extra configure arguments for a fresh build folder, e.g. -DTERRA_ARCH=
"""
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
PIP_DIR = os.path.join(ROOT, "build", "pip")  # everything pip's build writes in the checkout


def cmake_version():
    text = open(os.path.join(ROOT, "CMakeLists.txt")).read()
    return re.search(r"project\(terra VERSION ([0-9.]+)", text).group(1)


def cached(build_dir, var):
    """A CMake cache entry of an existing build folder ('' when unset)."""
    try:
        text = open(os.path.join(build_dir, "CMakeCache.txt")).read()
    except OSError:
        return ""
    m = re.search(rf"^{var}:[A-Z]+=(.*)$", text, re.M)
    return m.group(1) if m else ""


class CMakeBuild(build_ext):
    """Builds terra._terra with the project's CMake build instead of setuptools' compiler calls."""

    def run(self):
        for ext in self.extensions:
            self.build_cmake(ext)

    def build_cmake(self, ext):
        build_dir = os.path.abspath(os.environ.get("TERRA_CMAKE_BUILD_DIR") or os.path.join(PIP_DIR, "cmake"))
        jobs = os.environ.get("TERRA_JOBS") or os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
            args = ["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                    "-DTERRA_BUILD_PYTHON=ON", f"-DTERRA_PYTHON_EXECUTABLE={sys.executable}",
                    "-DTERRA_BUILD_TESTS=OFF", "-DTERRA_BUILD_BENCH=OFF", "-DTERRA_BUILD_EXAMPLES=OFF",
                    "-DTERRA_BUILD_PROGRAMS=OFF"]
            if shutil.which("ninja"):
                args += ["-G", "Ninja"]
            args += shlex.split(os.environ.get("TERRA_CMAKE_ARGS", ""))
            subprocess.check_call(args)
        elif cached(build_dir, "TERRA_BUILD_PYTHON").upper() not in ("ON", "1", "TRUE", "YES"):
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build_dir, "-DTERRA_BUILD_PYTHON=ON"])
        # The default target, not just terra_python: the install step below needs every target its
        # rules name (a fresh folder here builds only libterra and the binding; a reused one is
        # usually fully built already).
        subprocess.check_call(["cmake", "--build", build_dir, "-j", jobs])

        # Stage with the install rules (install RPATHs), then take the two shared objects.
        stage = os.path.join(PIP_DIR, "stage")
        shutil.rmtree(stage, ignore_errors=True)
        subprocess.check_call(["cmake", "--install", build_dir, "--prefix", stage])
        exts = glob.glob(os.path.join(stage, "**", "terra", "_terra*.so"), recursive=True)
        libs = glob.glob(os.path.join(stage, "**", "libterra.so.0"), recursive=True)
        if len(exts) != 1 or len(libs) != 1:
            raise RuntimeError(f"terra: expected one _terra*.so and one libterra.so.0 under {stage}, "
                               f"found {exts} and {libs}")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(exts[0], target)
        # The SONAME the extension asks for, as a real file next to it (the RPATH's $ORIGIN).
        shutil.copyfile(libs[0], os.path.join(os.path.dirname(target), "libterra.so.0"))


version = cmake_version()
if version != "0.1.0":  # pyproject.toml's version, kept equal to the C++ library's
    sys.exit(f"terra: CMakeLists.txt says version {version}; update pyproject.toml's version to match")

os.makedirs(PIP_DIR, exist_ok=True)
setup(
    packages=find_packages("python", include=["terra", "terra.*"]),
    package_dir={"": "python"},
    ext_modules=[Extension("terra._terra", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": PIP_DIR}, "egg_info": {"egg_base": PIP_DIR}},
    zip_safe=False,
)
