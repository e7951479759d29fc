"""The command line run in this process (specdec.cli.main), its exit code and output captured, and the
flags that point it at the tiny pair."""

from specdec.cli.main import main


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def tiny_args(dirs, *extra):
    return ["--target-model", dirs["target"], "--draft-model", dirs["draft"], *extra]
