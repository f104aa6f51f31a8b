"""kafka-chaos: break real Kafka consumer groups on purpose and judge, from a
recorded history, whether the group kept its promises."""

__version__ = "0.1.0"
