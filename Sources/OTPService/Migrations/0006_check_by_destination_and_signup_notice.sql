-- Issue 22: the Supabase door verifies by phone or email and code, not by verification id, so
-- Check finds the destination's newest pending verification (this index); and a sign-up that
-- names a contact an account already has answers as for a new account and sends its owner a
-- notice of purpose signup_attempted (never pending, like contact_changed).
CREATE INDEX verifications_destination_pending_idx ON verifications (destination, created_at)
    WHERE status = 'pending';
ALTER TABLE verifications DROP CONSTRAINT verifications_purpose_check;
ALTER TABLE verifications ADD CONSTRAINT verifications_purpose_check
    CHECK (purpose IN ('login', 'signup', 'verify', 'password_reset', 'change_contact', 'contact_changed',
        'signup_attempted'));
