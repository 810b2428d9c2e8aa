-- Issue 22: a sign-up's confirmation email may carry a link as well as the code
-- (StartRequest.link_base): the verification keeps the link's base so that a resend's message
-- carries its new code's link, and each message the base its link is rendered from.
ALTER TABLE verifications ADD COLUMN link_base text NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN link_base text NOT NULL DEFAULT '';
