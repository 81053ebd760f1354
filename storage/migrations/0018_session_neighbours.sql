-- Recall's session hop (issue 17): the memories stored just before and after a match in
-- its session (session_id), read in id order. Partial: memories without a session stay out.
CREATE INDEX memories_user_session ON memories (user_id, session_id, id)
    WHERE session_id IS NOT NULL;
