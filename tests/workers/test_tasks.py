from workers import app
from workers.tasks import gate_run_execute_task, gate_run_reap_stale_task


def test_model_tasks_are_routed_to_the_gpu_queue_with_late_acks():
    assert app.amqp.router.route({}, gate_run_execute_task.name)["queue"].name == "gpu"
    assert app.amqp.router.route({}, gate_run_reap_stale_task.name)["queue"].name == "cpu"
    assert gate_run_execute_task.acks_late and gate_run_execute_task.reject_on_worker_lost
    assert gate_run_execute_task.max_retries == 5 and gate_run_execute_task.retry_backoff


def test_json_only_and_time_limits():
    assert app.conf.task_serializer == "json" and app.conf.accept_content == ["json"]
    assert 0 < app.conf.task_soft_time_limit < app.conf.task_time_limit
