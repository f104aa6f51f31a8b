"""Where a run writes (chaos.runner.free_run_dir): never into an earlier run's directory."""

from chaos.runner import free_run_dir


def test_a_run_never_reuses_an_earlier_runs_directory(tmp_path):
    assert free_run_dir(tmp_path, "exp", 0, 7) == (0, 7, tmp_path / "exp" / "run-000-seed-7")
    (tmp_path / "exp" / "run-000-seed-7").mkdir(parents=True)
    (tmp_path / "exp" / "run-001-seed-7").mkdir()
    assert free_run_dir(tmp_path, "exp", 0, 7) == (2, 7, tmp_path / "exp" / "run-002-seed-7")
    assert free_run_dir(tmp_path, "exp", 1, 8) == (1, 8, tmp_path / "exp" / "run-001-seed-8")
