from workers import app
from workers.tasks import adversarial_set_build_task, gate_run_execute_task, gate_run_reap_stale_task


def test_model_tasks_are_routed_to_the_gpu_queue_with_late_acks():
    for task, name in (
        (gate_run_execute_task, "gpu"),
        (adversarial_set_build_task, "gpu"),
        (gate_run_reap_stale_task, "cpu"),
    ):
        queue = app.amqp.router.route({}, task.name)["queue"]
        # Its own exchange and key, so a cpu worker never receives model work and vice versa.
        assert (queue.name, queue.exchange.name, queue.routing_key) == (name, name, name)
    assert gate_run_execute_task.acks_late and gate_run_execute_task.reject_on_worker_lost
    assert gate_run_execute_task.max_retries == 5 and gate_run_execute_task.retry_backoff
    assert adversarial_set_build_task.acks_late and adversarial_set_build_task.reject_on_worker_lost


def test_json_only_and_time_limits():
    assert app.conf.task_serializer == "json" and app.conf.accept_content == ["json"]
    assert 0 < app.conf.task_soft_time_limit < app.conf.task_time_limit
