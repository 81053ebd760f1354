-- The queue submission a receipt was written for (tasks/queue.py adds one to every
-- retry-window key it sends): a message the broker redelivers after a worker died
-- carries the same submission, and finds its own receipt whatever the retry window's
-- rules say by then (memory/writes.py).
ALTER TABLE write_receipts ADD COLUMN submission text;
