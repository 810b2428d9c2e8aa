-- Decoy verifications (docs/otp.md, Decoys): started like any other and counted by every limit,
-- but their messages are never written to the outbox. The password reset starts one for an
-- email without an account, so that its verification id answers Resend and Check exactly as a
-- real one does (issue 19, item 7).
ALTER TABLE verifications ADD COLUMN decoy boolean NOT NULL DEFAULT false;
