-- wb.corpus: the Brightlane support corpus generator (pure Lua 5.4, no dependency on `wb`).
--
--   local corpus = require("wb.corpus")
--   local c = corpus.generate{seed = 1}            -- defaults: the shipped corpus
--   c.train, c.val                                 -- text, documents joined by corpus.SEP
--   corpus.stats(c.train)                          -- measured statistics of any corpus text
--
-- Everything random comes from a PCG32 generator implemented below with Lua 5.4 integer
-- arithmetic, so the same seed gives byte-identical text on every platform and Lua build.
-- docs/corpus.md explains the templates and why the weights are what they are.

local M = {}

M.EOT = "<|endoftext|>"
-- Every document is followed by "\n<|endoftext|>\n": the end-of-text token sits on its own line.
M.SEP = "\n" .. M.EOT .. "\n"

---------------------------------------------------------------------------------------------
-- PCG32 (O'Neill, pcg32_srandom_r / pcg32_random_r). Lua 5.4 integers are 64-bit two's
-- complement and wrap on overflow, which is exactly the arithmetic PCG needs; `>>` is a logical
-- shift.
---------------------------------------------------------------------------------------------
local PCG_MULT = 6364136223846793005
local MASK32 = 0xffffffff

local Rng = {}
Rng.__index = Rng

local function pcg_step(self)
  self.state = self.state * PCG_MULT + self.inc
end

--- New generator from an integer seed and an optional stream id (distinct streams are independent).
function M.rng(seed, stream)
  assert(math.type(seed) == "integer", "seed must be an integer")
  local self = setmetatable({ state = 0, inc = ((stream or 54) << 1) | 1 }, Rng)
  pcg_step(self)
  self.state = self.state + seed
  pcg_step(self)
  return self
end

--- Next uniform 32-bit value in [0, 2^32).
function Rng:u32()
  local old = self.state
  pcg_step(self)
  local xorshifted = (((old >> 18) ~ old) >> 27) & MASK32
  local rot = old >> 59
  return ((xorshifted >> rot) | (xorshifted << ((-rot) & 31))) & MASK32
end

--- Uniform integer in [1, n] (multiply-shift; bias below 2^-20 for the small n used here).
function Rng:int(n)
  return ((self:u32() * n) >> 32) + 1
end

--- True with probability num/den (integers, so no floating point is involved).
function Rng:chance(num, den)
  return self:int(den) <= num
end

--- Uniform element of a list.
function Rng:pick(list)
  return list[self:int(#list)]
end

--- Index drawn from a list of integer weights.
function Rng:weighted(weights)
  local total = 0
  for i = 1, #weights do total = total + weights[i] end
  local r = self:int(total)
  for i = 1, #weights do
    r = r - weights[i]
    if r <= 0 then return i end
  end
  return #weights
end

--- In-place Fisher-Yates shuffle.
function Rng:shuffle(list)
  for i = #list, 2, -1 do
    local j = self:int(i)
    list[i], list[j] = list[j], list[i]
  end
  return list
end

---------------------------------------------------------------------------------------------
-- People
---------------------------------------------------------------------------------------------
M.CUSTOMERS = {
  "Ana", "Ben", "Carla", "David", "Elif", "Femi", "Grace", "Hiro", "Ines", "Jonas",
  "Kemal", "Lucia", "Marco", "Nadia", "Omar", "Priya", "Quinn", "Rosa", "Sam", "Tariq",
  "Uma", "Victor", "Wen", "Ximena", "Yusuf", "Zoe", "Aisha", "Bruno", "Chloe", "Diego",
  "Emma", "Felix", "Hana", "Ivan", "Julia", "Kofi", "Leo", "Mia", "Noah", "Olga",
}

-- Exactly 16 agents. Each conversation gets one agent, dealt from a shuffled bag of all 16, so
-- the names are used equally often and "Agent (" is followed by a uniform 16-way choice.
M.AGENTS = {
  "Lena", "Marta", "Tom", "Sofia", "Raj", "Nora", "Pablo", "Kai",
  "Ingrid", "Theo", "Amara", "Luca", "Yuki", "Owen", "Freya", "Dmitri",
}

---------------------------------------------------------------------------------------------
-- Conversation templates
--
-- Opening customer turns are always "Hi, " .. question. The question is drawn by first choosing
-- its first word from FIRST_WORDS (integer weights per thousand), then a question uniformly
-- among those starting with that word; so the first-word distribution after "Hi," is exactly
-- controlled (entropy about 3.0 bits) and independent of the customer's name.
-- {plan} is the customer's plan (Team or Business), {other} the other plan.
---------------------------------------------------------------------------------------------
M.FIRST_WORDS = {
  { word = "how",   weight = 270 },
  { word = "I",     weight = 150 },
  { word = "can",   weight = 110 },
  { word = "where", weight = 100 },
  { word = "does",  weight = 80 },
  { word = "my",    weight = 80 },
  { word = "is",    weight = 70 },
  { word = "why",   weight = 70 },
  { word = "what",  weight = 70 },
}

-- Questions by first word: { text, intent }.
local QUESTIONS = {
  how = {
    { "how do I export my board data?", "export_board" },
    { "how do I export a board to CSV?", "export_csv" },
    { "how do I reset my password?", "password_reset" },
    { "how do I change the email on my account?", "email_change" },
    { "how do I switch to annual billing?", "annual_switch" },
    { "how do I upgrade from Team to Business?", "upgrade" },
    { "how do I connect Slack to a board?", "slack_connect" },
    { "how do I turn on two-factor login?", "twofa_enable" },
    { "how do I cancel my subscription?", "cancel" },
    { "how can I get a copy of last month's invoice?", "invoice_copy" },
  },
  I = {
    { "I was charged twice for the {plan} plan this month. Can you refund the duplicate?", "duplicate_charge" },
    { "I was charged twice this month.", "duplicate_charge" },
    { "I can't log in because my two-factor codes stopped working.", "twofa_locked" },
    { "I never received the password reset email.", "reset_email_missing" },
    { "I want to cancel our {plan} plan.", "cancel" },
    { "I would like to request a dark mode for the app.", "feature_dark_mode" },
    { "I don't get notifications for mentions anymore.", "bug_notifications" },
    { "I need an invoice with our company address on it.", "invoice_address" },
  },
  can = {
    { "can I get a refund for a duplicate charge?", "refund_request" },
    { "can I switch from monthly to annual billing?", "annual_switch" },
    { "can I export a board to JSON?", "export_json" },
    { "can you add recurring cards?", "feature_recurring" },
    { "can I downgrade from Business to Team?", "downgrade" },
    { "can I connect Brightlane to Google Calendar?", "calendar_connect" },
  },
  where = {
    { "where can I download my invoices?", "invoice_copy" },
    { "where is the export option for a board?", "export_board" },
    { "where do I change my password?", "password_change" },
    { "where do I find the Slack integration?", "slack_connect" },
    { "where can I see which plan we are on?", "plan_info" },
  },
  does = {
    { "does the CSV export include comments?", "export_comments" },
    { "does Brightlane have a Microsoft Teams integration?", "feature_teams" },
    { "does the Business plan include SSO?", "plan_sso" },
    { "does annual billing come with a discount?", "annual_discount" },
  },
  -- Every "my" question is "my account ...": after "Hi, my" the next word is always " account".
  my = {
    { "my account was charged twice this month.", "duplicate_charge" },
    { "my account is locked after too many login attempts.", "account_locked" },
    { "my account still shows the Team plan after I upgraded.", "upgrade_missing" },
    { "my account email is wrong, can you change it?", "email_change" },
  },
  is = {
    { "is there a way to export all boards at once?", "export_all" },
    { "is sync down right now? My cards are not updating.", "bug_sync" },
    { "is it possible to pay by bank transfer?", "payment_methods" },
    { "is there a discount for nonprofits?", "nonprofit" },
  },
  why = {
    { "why was I charged twice this month?", "duplicate_charge" },
    { "why are my cards not syncing between devices?", "bug_sync" },
    { "why do attachments fail to upload?", "bug_attachments" },
    { "why did I stop getting notifications?", "bug_notifications" },
  },
  what = {
    { "what is the difference between Team and Business?", "plan_compare" },
    { "what happens to my data if I cancel?", "cancel_data" },
    { "what formats can I export a board to?", "export_formats" },
    { "what does the Slack integration post?", "slack_what" },
  },
}
M.QUESTIONS = QUESTIONS

-- Intents: the topic (for follow-ups) and 2-4 agent replies. The first reply is drawn twice as
-- often as each of the others, so greedy decoding has one clear path.
local INTENTS = {
  export_board = { topic = "export", replies = {
    "Open the board menu, choose Export, and pick CSV or JSON. The file downloads right away.",
    "Go to the board menu and select Export. CSV works in spreadsheets and JSON keeps every field.",
    "Use Export in the board menu, then choose CSV or JSON. Large boards can take a minute.",
  } },
  export_csv = { topic = "export", replies = {
    "Open the board menu, choose Export, and select CSV. Each card becomes one row.",
    "In the board menu pick Export, then CSV. You can open the file in any spreadsheet app.",
  } },
  export_json = { topic = "export", replies = {
    "Yes. Open the board menu, choose Export, and select JSON to get every field of every card.",
    "Yes, JSON is one of the export formats. Pick it under Export in the board menu.",
  } },
  export_all = { topic = "export", replies = {
    "Yes. Workspace admins can export every board from Settings, then Data export.",
    "Yes, go to Settings, then Data export, and we email you one file with all boards.",
  } },
  export_comments = { topic = "export", replies = {
    "No, CSV exports have cards, lists, labels and due dates but not comments. JSON includes comments.",
    "CSV leaves comments out to keep one row per card. Export to JSON if you need the comments.",
  } },
  export_formats = { topic = "export", replies = {
    "Boards export to CSV or JSON. Open the board menu and choose Export to pick one.",
    "You can export to CSV for spreadsheets or JSON for a complete copy, both from the board menu.",
  } },
  duplicate_charge = { topic = "billing", replies = {
    "Sorry about that. I can see the duplicate charge and I've refunded it. You'll get an email receipt shortly.",
    "I found the second charge on your {plan} plan and refunded it today. It should reach your card in a few days.",
    "That was a billing error on our side. The duplicate is refunded and you won't be charged twice again.",
  } },
  refund_request = { topic = "billing", replies = {
    "Yes. Send me the date of the charge and I'll refund the duplicate right away.",
    "Of course. I've found the duplicate charge and issued a full refund for it.",
  } },
  invoice_copy = { topic = "invoice", replies = {
    "Go to Settings, then Billing, and open Invoices. Every invoice can be downloaded as a PDF.",
    "All invoices are under Settings, then Billing, then Invoices. Click one to download the PDF.",
    "You'll find them in Billing settings under Invoices. I've also emailed last month's invoice to you.",
  } },
  invoice_address = { topic = "invoice", replies = {
    "Add your company address under Settings, then Billing, then Company details. New invoices will show it.",
    "Sure. Enter the address in Billing settings and I'll reissue your latest invoice with it.",
  } },
  annual_switch = { topic = "annual", replies = {
    "Go to Settings, then Billing, and choose Switch to annual. The change starts at your next renewal.",
    "Yes. In Billing settings pick Annual billing. You pay for twelve months at a lower monthly price.",
  } },
  annual_discount = { topic = "annual", replies = {
    "Yes, paying annually costs about two months less than paying monthly for a year.",
    "It does. Annual billing gives you roughly two free months compared to monthly billing.",
  } },
  upgrade = { topic = "plan", replies = {
    "Open Settings, then Billing, and choose Change plan. Select Business and confirm.",
    "Go to Billing settings and click Change plan, then pick Business. The upgrade applies immediately.",
  } },
  downgrade = { topic = "plan", replies = {
    "Yes. In Billing settings choose Change plan and select Team. It takes effect at the next renewal.",
    "You can. Open Settings, then Billing, then Change plan, and pick Team.",
  } },
  upgrade_missing = { topic = "plan", replies = {
    "Sorry for the confusion. The payment went through, so I've applied the Business plan to your workspace now.",
    "Thanks for flagging it. The upgrade was stuck and I've refreshed it, so you should see Business now.",
  } },
  plan_info = { topic = "plan", replies = {
    "Open Settings, then Billing. Your current plan and renewal date are shown at the top.",
    "Your plan is listed under Settings, then Billing, together with the next renewal date.",
  } },
  plan_compare = { topic = "plan", replies = {
    "Team covers boards, cards and integrations. Business adds SSO, admin controls and priority support.",
    "Business includes everything in Team plus SSO, audit logs and priority support.",
  } },
  plan_sso = { topic = "plan", replies = {
    "Yes, SSO is included in Business. Set it up under Settings, then Security.",
    "It does. Business workspaces can turn on SSO in the Security settings.",
  } },
  payment_methods = { topic = "billing", replies = {
    "Bank transfer is available for annual Business plans. Monthly plans are paid by card.",
    "Yes, for annual plans. Choose Bank transfer in Billing settings and we send you the details.",
  } },
  nonprofit = { topic = "billing", replies = {
    "Yes, registered nonprofits get 50 percent off. Reply with your registration document and I'll apply it.",
    "We offer half price for nonprofits. Send us proof of status and we'll update your plan.",
  } },
  password_reset = { topic = "login", replies = {
    "Click Forgot password on the login page and we'll email you a reset link.",
    "On the login page choose Forgot password. The reset link in the email is valid for one hour.",
  } },
  password_change = { topic = "login", replies = {
    "Go to Settings, then Security, and choose Change password.",
    "Open Settings, then Security. You can set a new password there.",
  } },
  reset_email_missing = { topic = "login", replies = {
    "Please check your spam folder. I've also sent a new reset link to the email on your account.",
    "Sometimes it lands in spam. I've just sent a fresh reset email, it should arrive within a minute.",
  } },
  twofa_enable = { topic = "login", replies = {
    "Go to Settings, then Security, and turn on Two-factor login. Scan the QR code with your authenticator app.",
    "Open Security settings and enable Two-factor login, then save your backup codes somewhere safe.",
  } },
  twofa_locked = { topic = "login", replies = {
    "Sorry about that. Use one of your backup codes to log in, or I can verify you by email and reset two-factor.",
    "Let's get you back in. I've sent a verification email, and once you confirm it I'll reset two-factor.",
  } },
  account_locked = { topic = "login", replies = {
    "For safety we lock the account for 30 minutes. You can also unlock it now with the link I just emailed you.",
    "The lock lifts after 30 minutes. I've sent you an unlock link so you don't have to wait.",
  } },
  email_change = { topic = "login", replies = {
    "Go to Settings, then Profile, and edit your email. We send a confirmation link to the new address.",
    "You can change it under Settings, then Profile. Confirm the new address from the email we send.",
  } },
  slack_connect = { topic = "integration", replies = {
    "Open the board menu, choose Integrations, and click Connect Slack. Then pick a channel.",
    "Go to Integrations in the board menu and select Slack. Sign in to Slack and choose a channel.",
  } },
  slack_what = { topic = "integration", replies = {
    "It posts new cards, moved cards and comments to the channel you choose.",
    "The Slack integration shares card updates, due dates and comments in one channel per board.",
  } },
  calendar_connect = { topic = "integration", replies = {
    "Yes. Open Integrations and choose Google Calendar, and cards with due dates show up as events.",
    "Yes, connect it under Integrations. Due dates on cards appear in your calendar.",
  } },
  bug_sync = { topic = "bug", replies = {
    "Sorry about that. Please sign out and back in to force a full sync, and tell me if the cards still differ.",
    "We had a short sync delay earlier. It's fixed now, so pull to refresh and your cards should update.",
  } },
  bug_notifications = { topic = "bug", replies = {
    "Please check Settings, then Notifications, and make sure mentions are switched on.",
    "A recent update reset some notification settings. Turn mentions back on under Settings, then Notifications.",
  } },
  bug_attachments = { topic = "bug", replies = {
    "Attachments are limited to 100 MB each. If your file is smaller, please send me the error message.",
    "Sorry about that. We're fixing an upload issue today. Files under 100 MB should work again soon.",
  } },
  feature_dark_mode = { topic = "feature", replies = {
    "Thanks for the idea! I've added your vote to the dark mode request.",
    "Dark mode is on our roadmap. I've added your vote so the team sees the demand.",
  } },
  feature_recurring = { topic = "feature", replies = {
    "Not yet, but recurring cards are on our roadmap. I've added your vote.",
    "Great idea. I've passed it to the product team and added you to the request.",
  } },
  feature_teams = { topic = "feature", replies = {
    "Not yet. Slack is supported today, and I've added your vote for Microsoft Teams.",
    "We don't have one yet, but it's a popular request and I've added your vote.",
  } },
  cancel = { topic = "cancel", replies = {
    "Sorry to see you go. Go to Settings, then Billing, and choose Cancel plan. You keep access until the period ends.",
    "You can cancel under Settings, then Billing. Your boards stay available until the end of the billing period.",
  } },
  cancel_data = { topic = "cancel", replies = {
    "Your boards stay read-only for 30 days after you cancel. Export them before then if you want a copy.",
    "We keep your data for 30 days after cancelling, then delete it. You can export everything first.",
  } },
}
M.INTENTS = INTENTS

-- Topic follow-ups: a customer question (no greeting) and 1-2 agent replies.
local FOLLOWUPS = {
  export = {
    { "Does the CSV include comments?", {
      "No, CSV has cards, lists, labels and due dates. Choose JSON if you need comments too." } },
    { "Can I export every board at once?", {
      "Yes, workspace admins can export all boards from Settings, then Data export." } },
    { "Will archived cards be included?", {
      "Yes, archived cards are included and marked in their own column.",
      "They are, with an archived flag on each one." } },
  },
  billing = {
    { "How long does the refund take?", {
      "Refunds usually reach your card within 5 to 10 business days.",
      "Usually a few days, depending on your bank." } },
    { "Will I get a corrected invoice?", {
      "Yes, a corrected invoice goes to your billing email today." } },
  },
  invoice = {
    { "Can you add our VAT number too?", {
      "Sure. Add it under Billing, then Company details, and every new invoice will show it." } },
    { "Can invoices go to our finance team?", {
      "Yes, add their address as a billing contact in Billing settings." } },
  },
  annual = {
    { "When does the annual plan start?", {
      "It starts when your current monthly period ends, so you never pay twice." } },
    { "Can I switch back to monthly later?", {
      "Yes, you can switch back at the end of the annual term." } },
  },
  plan = {
    { "Will I be charged the full price right away?", {
      "No, you only pay the prorated difference for the rest of this period." } },
    { "Do we keep our boards if we change plans?", {
      "Yes, every board stays. Only plan features change.",
      "Of course, boards and cards are never removed by a plan change." } },
  },
  login = {
    { "The link says it expired.", {
      "Links expire after one hour. Request a new one and use it right away." } },
    { "Can I use an authenticator app?", {
      "Yes, any authenticator app works. Scan the QR code under Security settings." } },
    { "Will my boards be affected?", {
      "No, login changes never touch your boards or cards." } },
  },
  integration = {
    { "Can I choose which channel it posts to?", {
      "Yes, pick a channel for each board in the integration settings." } },
    { "Does it work with Outlook too?", {
      "Yes, add the calendar feed link to Outlook or Google Calendar." } },
  },
  bug = {
    { "It still happens after a restart.", {
      "Thanks for checking. I've filed a bug report and our engineers will follow up by email.",
      "Thanks. I've escalated it to our engineers and will email you when it's fixed." } },
    { "Is there a workaround for now?", {
      "Signing out and back in usually clears it until the fix is released." } },
    { "Do you need anything else from me?", {
      "A screenshot and your app version would help. You can reply with them here." } },
  },
  feature = {
    { "When will it be available?", {
      "I can't promise a date yet, but your vote is on the request." } },
    { "Can I follow the request somewhere?", {
      "Yes, it's on our public roadmap, and you'll get an email when it ships." } },
  },
  cancel = {
    { "Will I get a refund for the rest of the year?", {
      "Annual plans get a prorated refund for the unused full months." } },
    { "Can I export my data first?", {
      "Yes, please export your boards first. We keep the data for 30 days after the plan ends." } },
  },
}
M.FOLLOWUPS = FOLLOWUPS

local THANKS = {
  "Great, thank you!", "Perfect, that's what I needed.", "Thanks for the help!", "Got it, thanks.",
}
local BYES = {
  "Glad I could help. Have a great day!", "You're welcome! Reach out anytime.",
  "Happy to help. Have a good one!",
}
local GREETING = "Hello, this is {agent} from Brightlane support. How can I help?"

---------------------------------------------------------------------------------------------
-- Triage templates: { message, category, base priority, needs_human }.
-- Priority is derived from the content: the base level of the message, one level up with an
-- "urgent" suffix, one level down with a "no rush" suffix; needs_human is the message's flag,
-- or true whenever the final priority is urgent.
---------------------------------------------------------------------------------------------
M.LABELS = { "billing", "account", "bug", "how_to", "feature_request", "cancellation" }
M.PRIORITIES = { "low", "medium", "high", "urgent" }
local PRIO_INDEX = { low = 1, medium = 2, high = 3, urgent = 4 }

local TICKETS = {
  { "I was charged twice this month", "billing", "high", true },
  { "I was charged twice for the {plan} plan in {month}", "billing", "high", true },
  { "There is a duplicate charge on my card", "billing", "high", true },
  { "Please send me the invoice for {month}", "billing", "low", false },
  { "I need our VAT number on my invoices", "billing", "low", false },
  { "My card was declined when renewing the {plan} plan", "billing", "medium", false },
  { "Can I get a refund for the unused months of my annual plan", "billing", "medium", true },
  { "How do I switch from monthly to annual billing", "billing", "low", false },
  { "The amount on my {month} invoice is higher than the pricing page", "billing", "medium", true },

  { "I can't log in after resetting my password", "account", "high", true },
  { "I lost my phone and can't get past two-factor login", "account", "urgent", true },
  { "Please change the email on my account to my new work address", "account", "low", false },
  { "The password reset email never arrives", "account", "medium", false },
  { "I need to transfer account ownership to a colleague", "account", "medium", true },
  { "Someone logged into my account from an unknown device", "account", "urgent", true },
  { "My account is locked after too many login attempts", "account", "medium", false },

  { "Cards are not syncing between my laptop and phone", "bug", "high", false },
  { "I stopped getting notifications for mentions", "bug", "medium", false },
  { "Attachments fail to upload with an error", "bug", "medium", false },
  { "The board shows a blank page since the last update", "bug", "high", false },
  { "Cards I moved yesterday are back in their old lists", "bug", "high", true },
  { "The Slack integration posts every update twice", "bug", "medium", false },
  { "We lost all cards on a board after a sync error", "bug", "urgent", true },
  { "Due dates show one day off in the calendar", "bug", "medium", false },

  { "How do I export my board data", "how_to", "low", false },
  { "How do I export a board to CSV", "how_to", "low", false },
  { "Where do I connect Slack to a board", "how_to", "low", false },
  { "How do I invite a guest to a board", "how_to", "low", false },
  { "How do I archive old cards", "how_to", "low", false },
  { "How do I show due dates in Google Calendar", "how_to", "low", false },
  { "How do I move a card to another board", "how_to", "low", false },

  { "Please add a dark mode", "feature_request", "low", false },
  { "It would be great to export boards to PDF", "feature_request", "low", false },
  { "We need recurring cards for weekly tasks", "feature_request", "low", false },
  { "Please add a Microsoft Teams integration", "feature_request", "low", false },
  { "Can you add custom fields to cards", "feature_request", "low", false },
  { "We would love a timeline view for our roadmap", "feature_request", "low", false },

  { "Please cancel my subscription", "cancellation", "medium", true },
  { "I want to cancel our {plan} plan at the end of the month", "cancellation", "medium", true },
  { "Cancel my account and delete all my data", "cancellation", "high", true },
  { "We are moving to another tool, how do we cancel", "cancellation", "medium", true },
  { "Stop my annual renewal before I get charged again", "cancellation", "high", true },
}
M.TICKETS = TICKETS

-- Suffixes: { text, priority shift }. Weights (per 20): plain 12, urgent 5, calm 3.
local TICKET_SUFFIXES = {
  { "", 0 }, { ", it is blocking our whole team", 1 }, { ", we have a deadline today", 1 },
  { ", no rush", -1 }, { ", whenever you have time", -1 },
}
local TICKET_SUFFIX_WEIGHTS = { 12, 3, 2, 2, 1 }
local TICKET_ENDINGS = { "", ".", "!" }
local TICKET_ENDING_WEIGHTS = { 5, 4, 1 }
local TICKET_LEADS = { "", "Hello, ", "Hello team, ", "Good morning, " }
local TICKET_LEAD_WEIGHTS = { 6, 2, 1, 1 }

local MONTHS = {
  "January", "February", "March", "April", "May", "June",
  "July", "August", "September", "October", "November", "December",
}

---------------------------------------------------------------------------------------------
-- Document builders
---------------------------------------------------------------------------------------------
local function fill(template, vars)
  return (template:gsub("{(%w+)}", function(k)
    local v = vars[k]
    assert(v, "corpus template variable {" .. k .. "} has no value")
    return v
  end))
end

local function reply_weights(n)
  local w = {}
  for i = 1, n do w[i] = (i == 1) and 2 or 1 end
  return w
end

local function pick_reply(rng, replies)
  return replies[rng:weighted(reply_weights(#replies))]
end

local FIRST_WORD_WEIGHTS = {}
for i, fw in ipairs(M.FIRST_WORDS) do FIRST_WORD_WEIGHTS[i] = fw.weight end

-- Agent bag: deals all 16 names in a shuffled order, then reshuffles.
local function agent_dealer(rng)
  local bag, pos = {}, math.huge
  return function()
    if pos > #M.AGENTS then
      for i, a in ipairs(M.AGENTS) do bag[i] = a end
      rng:shuffle(bag)
      pos = 1
    end
    local a = bag[pos]
    pos = pos + 1
    return a
  end
end

-- One conversation, 2-6 turns. Shape (probabilities per 100):
--   agent greeting first: 8
--   opening question + agent reply: always
--   then: stop 18 | topic follow-up pair 55 | thanks + goodbye pair 27
--   after a topic follow-up: stop 50 | thanks + goodbye 40 (customer thanks only if greeted) | thanks only 10
local function conversation(rng, agent)
  local customer = rng:pick(M.CUSTOMERS)
  local plan = rng:chance(3, 5) and "Team" or "Business"
  local vars = { plan = plan, other = plan == "Team" and "Business" or "Team", agent = agent }
  local lines = {}
  local function cust(t) lines[#lines + 1] = "Customer (" .. customer .. "): " .. fill(t, vars) end
  local function agt(t) lines[#lines + 1] = "Agent (" .. agent .. "): " .. fill(t, vars) end

  local greeted = rng:chance(8, 100)
  if greeted then agt(GREETING) end

  local word = M.FIRST_WORDS[rng:weighted(FIRST_WORD_WEIGHTS)].word
  local q = rng:pick(QUESTIONS[word])
  local intent = INTENTS[q[2]]
  cust("Hi, " .. q[1])
  agt(pick_reply(rng, intent.replies))

  local r = rng:int(100)
  if r <= 18 then
    -- stop after one exchange
  elseif r <= 73 then
    local f = rng:pick(FOLLOWUPS[intent.topic])
    cust(f[1])
    agt(pick_reply(rng, f[2]))
    local s = rng:int(100)
    if s <= 50 then
      -- stop
    elseif s <= 90 then
      cust(rng:pick(THANKS))
      if not greeted then agt(rng:pick(BYES)) end
    else
      cust(rng:pick(THANKS))
    end
  else
    cust(rng:pick(THANKS))
    agt(rng:pick(BYES))
  end
  return table.concat(lines, "\n")
end

-- Templates grouped by label: a ticket draws its label uniformly, then a template of that label,
-- so the six labels are equally frequent whatever the number of templates per label.
local TICKETS_BY_LABEL = {}
for _, t in ipairs(TICKETS) do
  TICKETS_BY_LABEL[t[2]] = TICKETS_BY_LABEL[t[2]] or {}
  table.insert(TICKETS_BY_LABEL[t[2]], t)
end

local function ticket_parts(rng, label)
  local t = rng:pick(TICKETS_BY_LABEL[label or rng:pick(M.LABELS)])
  local vars = { plan = rng:chance(3, 5) and "Team" or "Business", month = rng:pick(MONTHS) }
  local lead = TICKET_LEADS[rng:weighted(TICKET_LEAD_WEIGHTS)]
  local suffix = TICKET_SUFFIXES[rng:weighted(TICKET_SUFFIX_WEIGHTS)]
  local ending = TICKET_ENDINGS[rng:weighted(TICKET_ENDING_WEIGHTS)]
  local core = fill(t[1], vars)
  if lead ~= "" then core = core:sub(1, 1):lower() .. core:sub(2) end
  -- keep "I" capitalised after a lead-in
  core = core:gsub("^i ", "I "):gsub("^i'", "I'")
  local msg = lead .. core .. suffix[1] .. ending
  local prio = math.max(1, math.min(4, PRIO_INDEX[t[3]] + suffix[2]))
  local human = t[4] or prio == 4
  return msg, t[2], M.PRIORITIES[prio], human
end

local function ticket_label(rng, label)
  local msg, cat = ticket_parts(rng, label)
  return "Ticket: " .. msg .. "\nCategory: " .. cat
end

local function ticket_json(rng, label)
  local msg, cat, prio, human = ticket_parts(rng, label)
  return string.format('Ticket: %s\nTriage: {"category": "%s", "priority": "%s", "needs_human": %s}',
    msg, cat, prio, tostring(human))
end

---------------------------------------------------------------------------------------------
-- Corpus
---------------------------------------------------------------------------------------------
M.DEFAULTS = {
  seed = 1,
  conversations = 11000,  -- conversation documents in train
  tickets = 6000,         -- "Category:" label records in train
  json_tickets = nil,     -- "Triage:" JSON records in train; default tickets // 4
  val_fraction = 0.07,    -- validation size relative to each train count
}

local function build(rng, kinds, dealer, exclude, seen)
  local docs = {}
  for _, kind in ipairs(kinds) do
    local doc
    -- For validation: redraw until the document is in neither train nor validation so far.
    -- The ticket label is fixed before redrawing so that validation labels stay balanced.
    local label = kind ~= "c" and rng:pick(M.LABELS) or nil
    for _ = 1, 200 do
      if kind == "c" then doc = conversation(rng, dealer())
      elseif kind == "t" then doc = ticket_label(rng, label)
      else doc = ticket_json(rng, label) end
      if not exclude or (not exclude[doc] and not seen[doc]) then break end
      doc = nil
    end
    if doc then
      docs[#docs + 1] = doc
      if seen then seen[doc] = true end
    end
  end
  return docs
end

local function kinds_list(rng, nc, nt, nj)
  local kinds = {}
  for _ = 1, nc do kinds[#kinds + 1] = "c" end
  for _ = 1, nt do kinds[#kinds + 1] = "t" end
  for _ = 1, nj do kinds[#kinds + 1] = "j" end
  return rng:shuffle(kinds)
end

--- Join documents into corpus text: each document followed by SEP.
function M.join(docs)
  if #docs == 0 then return "" end
  return table.concat(docs, M.SEP) .. M.SEP
end

--- Split corpus text back into documents.
function M.split(text)
  local docs, pos = {}, 1
  while true do
    local s, e = text:find(M.SEP, pos, true)
    if not s then
      local rest = text:sub(pos)
      if rest ~= "" then docs[#docs + 1] = rest end
      break
    end
    docs[#docs + 1] = text:sub(pos, s - 1)
    pos = e + 1
  end
  return docs
end

--- Generate the corpus. opts: seed, conversations, tickets, json_tickets, val_fraction.
--- Returns { train = text, val = text, train_docs = {...}, val_docs = {...}, opts = resolved }.
--- Train documents may repeat (the model is meant to memorize); validation documents are
--- distinct and none appears verbatim in train.
function M.generate(opts)
  opts = opts or {}
  local o = {}
  for k, v in pairs(M.DEFAULTS) do o[k] = v end
  for k, v in pairs(opts) do o[k] = v end
  if o.json_tickets == nil then o.json_tickets = o.tickets // 4 end
  assert(math.type(o.seed) == "integer", "seed must be an integer")

  local rng = M.rng(o.seed, 1)
  local train_docs = build(rng, kinds_list(rng, o.conversations, o.tickets, o.json_tickets),
    agent_dealer(rng))
  local in_train = {}
  for _, d in ipairs(train_docs) do in_train[d] = true end

  local vrng = M.rng(o.seed, 2)
  local function nval(n) return math.floor(n * o.val_fraction + 0.5) end
  local val_docs = build(vrng,
    kinds_list(vrng, nval(o.conversations), nval(o.tickets), nval(o.json_tickets)),
    agent_dealer(vrng), in_train, {})

  return { train = M.join(train_docs), val = M.join(val_docs),
           train_docs = train_docs, val_docs = val_docs, opts = o }
end

---------------------------------------------------------------------------------------------
-- Statistics (measured on text, so they hold for any corpus file)
---------------------------------------------------------------------------------------------

--- Shannon entropy in bits of a { key = count } table.
function M.entropy(counts)
  local total = 0
  for _, n in pairs(counts) do total = total + n end
  if total == 0 then return 0 end
  local h = 0
  for _, n in pairs(counts) do
    if n > 0 then
      local p = n / total
      h = h - p * math.log(p, 2)
    end
  end
  return h
end

local function inc(t, k) t[k] = (t[k] or 0) + 1 end

--- Measure a corpus text. Returns a table of counts (see docs/corpus.md).
function M.stats(text)
  local s = {
    bytes = #text, docs = 0, unique_docs = 0, conversations = 0, label_records = 0,
    json_records = 0, turns = 0, turns_hist = {}, first_words = {}, hi_my_next = {},
    agents = {}, agent_convs = {}, customers = {}, labels = {}, priorities = {},
    needs_human = {}, max_line = 0, max_doc = 0, lines = 0,
  }
  local seen = {}
  for _, doc in ipairs(M.split(text)) do
    s.docs = s.docs + 1
    if not seen[doc] then seen[doc] = true; s.unique_docs = s.unique_docs + 1 end
    if #doc > s.max_doc then s.max_doc = #doc end
    for line in doc:gmatch("[^\n]+") do
      s.lines = s.lines + 1
      if #line > s.max_line then s.max_line = #line end
    end
    if doc:sub(1, 8) == "Ticket: " then
      local label = doc:match("\nCategory: (.*)$")
      if label then
        s.label_records = s.label_records + 1
        inc(s.labels, label)
      else
        local json = doc:match("\nTriage: (.*)$")
        if json then
          s.json_records = s.json_records + 1
          local cat = json:match('"category": "([%w_]+)"')
          local pr = json:match('"priority": "(%a+)"')
          local nh = json:match('"needs_human": (%a+)')
          inc(s.labels, cat or "?")
          inc(s.priorities, pr or "?")
          inc(s.needs_human, nh or "?")
        end
      end
    else
      s.conversations = s.conversations + 1
      local n, agent = 0, nil
      for line in doc:gmatch("[^\n]+") do
        n = n + 1
        local who, name = line:match("^(%a+) %(([^)]*)%): ")
        if who == "Agent" then inc(s.agents, name); agent = name
        elseif who == "Customer" then inc(s.customers, name) end
        local w = line:match("^Customer %([^)]*%): Hi, (%a+)")
        if w then inc(s.first_words, w) end
      end
      if agent then inc(s.agent_convs, agent) end
      s.turns = s.turns + n
      inc(s.turns_hist, n)
    end
  end
  for nxt in text:gmatch("Hi, my(%s?%a*)") do inc(s.hi_my_next, nxt) end
  s.first_word_entropy = M.entropy(s.first_words)
  return s
end

local function sorted_counts(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    if t[a] ~= t[b] then return t[a] > t[b] end
    return tostring(a) < tostring(b)
  end)
  return keys
end
M.sorted_counts = sorted_counts

--- Human-readable report of M.stats output.
function M.format_stats(s, title)
  local out = {}
  local function add(...) out[#out + 1] = string.format(...) end
  if title then add("== %s ==", title) end
  add("bytes %d, docs %d (unique %d): conversations %d, label records %d, json records %d",
    s.bytes, s.docs, s.unique_docs, s.conversations, s.label_records, s.json_records)
  add("lines %d, longest line %d bytes, longest doc %d bytes", s.lines, s.max_line, s.max_doc)
  local th = {}
  for _, k in ipairs(sorted_counts(s.turns_hist)) do th[#th + 1] = k .. ":" .. s.turns_hist[k] end
  add("turns per conversation: mean %.2f; %s", s.conversations > 0 and s.turns / s.conversations or 0,
    table.concat(th, " "))
  local total = 0
  for _, n in pairs(s.first_words) do total = total + n end
  local fw = {}
  for _, k in ipairs(sorted_counts(s.first_words)) do
    fw[#fw + 1] = string.format("%s %.3f", k, s.first_words[k] / total)
  end
  add("first word after 'Hi,' (%d openings, entropy %.3f bits): %s", total, s.first_word_entropy,
    table.concat(fw, ", "))
  local hm = {}
  for _, k in ipairs(sorted_counts(s.hi_my_next)) do hm[#hm + 1] = string.format("%q %d", k, s.hi_my_next[k]) end
  add("after 'Hi, my': %s", table.concat(hm, ", "))
  local function line(name, t)
    local parts, n, lo, hi = {}, 0, math.huge, 0
    for _, k in ipairs(sorted_counts(t)) do
      parts[#parts + 1] = k .. " " .. t[k]
      n = n + 1
      lo = math.min(lo, t[k]); hi = math.max(hi, t[k])
    end
    add("%s (%d distinct, min %d, max %d): %s", name, n, n > 0 and lo or 0, hi, table.concat(parts, ", "))
  end
  line("agent turns", s.agents)
  line("agent conversations", s.agent_convs)
  line("customer turns", s.customers)
  line("labels (both formats)", s.labels)
  line("json priorities", s.priorities)
  line("json needs_human", s.needs_human)
  return table.concat(out, "\n")
end

return M
