-- Issue 21 §2: a signed-in account adds or changes its phone or email with a code of purpose
-- change_contact, bound to the account by `subject` (given back by Check, so a code proved for
-- one account cannot change another's); the contact it replaced gets a notice without a code,
-- written as a verification of purpose contact_changed that is never pending (no code can be
-- checked against it) and its message, through the outbox like any code.
ALTER TABLE verifications DROP CONSTRAINT verifications_purpose_check;
ALTER TABLE verifications ADD CONSTRAINT verifications_purpose_check
    CHECK (purpose IN ('login', 'signup', 'verify', 'password_reset', 'change_contact', 'contact_changed'));
ALTER TABLE verifications ADD COLUMN subject text NOT NULL DEFAULT '' CHECK (octet_length(subject) <= 128);
