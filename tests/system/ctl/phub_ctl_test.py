#!/usr/bin/python3
"""phub-ctl against a real control socket (lib/ctl's server with the unit tests' fake handler): exit
codes and messages with no server, a normal command, an error answer, a relative reload path, a
timeout, a stale socket file, the socket's mode, and its usage."""
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import unittest

CTL = None          # set from the command line
FAKE_SERVER = None


def run(*argv, cwd=None):
    r = subprocess.run([CTL, *argv], capture_output=True, text=True, timeout=60, cwd=cwd)
    return r.returncode, r.stdout, r.stderr


class WithoutServer(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="phub-ctl-test-")
        self.sock = os.path.join(self.tmp.name, "ctl.sock")

    def tearDown(self):
        self.tmp.cleanup()

    def test_absent_server_exits_2_and_says_so(self):
        self.assertEqual(run("--socket", self.sock, "status"),
                         (2, "", f"phub-ctl: no phub-server listening on {self.sock} "
                                 "(connect: No such file or directory)\n"))

    def test_a_crashed_servers_socket_file_exits_2(self):
        server = subprocess.Popen([FAKE_SERVER, self.sock], stdout=subprocess.PIPE, text=True)
        self.assertEqual(server.stdout.readline(), "ready\n")
        server.send_signal(signal.SIGKILL)  # leaves its socket file behind, as a crash does
        server.wait()
        server.stdout.close()
        self.assertTrue(stat.S_ISSOCK(os.lstat(self.sock).st_mode))
        self.assertEqual(run("--socket", self.sock, "status"),
                         (2, "", f"phub-ctl: no phub-server listening on {self.sock} (connect: Connection refused)\n"))

    def test_usage(self):
        rc, out, _ = run("--help")
        self.assertEqual(rc, 0)
        self.assertTrue(out.startswith("usage: phub-ctl [--socket PATH]"), out)
        rc, _, err = run()
        self.assertEqual(rc, 64)
        self.assertTrue(err.startswith("usage: phub-ctl"), err)
        self.assertEqual(run("--sock", "x", "status"), (64, "", "phub-ctl: unknown option '--sock' (see --help)\n"))
        self.assertEqual(run("--timeout", "soon", "status")[0], 64)


class WithServer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="phub-ctl-test-")
        cls.sock = os.path.join(cls.tmp.name, "ctl.sock")
        # drain of job "slow" takes 3 s: longer than the timeout test waits
        cls.server = subprocess.Popen([FAKE_SERVER, cls.sock, "3000"], stdout=subprocess.PIPE, text=True)
        assert cls.server.stdout.readline() == "ready\n"

    @classmethod
    def tearDownClass(cls):
        cls.server.send_signal(signal.SIGTERM)
        cls.server.wait(timeout=10)
        cls.server.stdout.close()
        cls.tmp.cleanup()

    def ctl(self, *words, cwd=None):
        return run("--socket", self.sock, *words, cwd=cwd)

    def test_socket_is_mode_0600(self):
        self.assertEqual(stat.S_IMODE(os.lstat(self.sock).st_mode), 0o600)

    def test_a_command_prints_its_answer_on_stdout(self):
        self.assertEqual(self.ctl("version"), (0, "phub 0.1.0\n", ""))
        rc, out, _ = self.ctl("stats", "--json")
        self.assertEqual((rc, json.loads(out)), (0, {"pushes": 12}))

    def test_an_error_answer_goes_to_stderr_with_exit_1(self):
        self.assertEqual(self.ctl("job", "nosuch"), (1, "", "no job named 'nosuch'\n"))
        rc, out, err = self.ctl("frobnicate")
        self.assertEqual((rc, out), (1, ""))
        self.assertTrue(err.startswith("unknown command 'frobnicate'; commands: status, stats [--json],"), err)

    def test_reload_sends_a_relative_file_as_an_absolute_path(self):
        self.assertEqual(self.ctl("reload", "conf dir/../conf dir/new.lua", cwd=self.tmp.name),
                         (0, f"reloaded from {self.tmp.name}/conf dir/new.lua\n", ""))

    def test_no_answer_in_time_exits_3(self):
        rc, _, err = self.ctl("--timeout", "0.5", "drain", "slow")
        self.assertEqual((rc, err), (3, f"phub-ctl: no answer from {self.sock} within 0.5 s (--timeout)\n"))


if __name__ == "__main__":
    CTL, FAKE_SERVER = sys.argv[1], sys.argv[2]
    unittest.main(argv=[sys.argv[0], "-v"])
