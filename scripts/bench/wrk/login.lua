-- A password sign-in with one account's email and password, again and again (every answer a new
-- session): POST /v1/login or the Supabase door's /auth/v1/token?grant_type=password.
-- Arguments: -- PATH EMAIL PASSWORD
local request_text

function init(args)
    local body = '{"email":"' .. args[2] .. '","password":"' .. args[3] .. '"}'
    request_text = wrk.format("POST", args[1], { ["Content-Type"] = "application/json" }, body)
end

function request()
    return request_text
end
