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
-- Slot values
--
-- Templates name slots in braces ({board}, {invoice}, ...). Each conversation or ticket draws
-- one value per slot, so a conversation that mentions a board, an invoice or an error code
-- mentions the same one in every turn. The pools give the corpus a realistic vocabulary (board
-- and card names, companies, people, products, versions, codes, amounts and dates), which the
-- byte-level BPE tokenizer needs to learn its 2048 ids. No slot is used in the opening words of
-- a "Hi, ..." question, so the tested next-word distributions do not depend on them.
---------------------------------------------------------------------------------------------
local MONTHS = {
  "January", "February", "March", "April", "May", "June",
  "July", "August", "September", "October", "November", "December",
}
local MONTH_DAYS = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 }

M.BOARDS = {
  "Q3 launch plan", "Hiring pipeline", "Website redesign", "Product roadmap", "Marketing calendar",
  "Customer onboarding", "Sprint backlog", "Bug triage", "Content calendar", "Event planning",
  "Office move", "Budget review", "Sales pipeline", "Design system", "Mobile app release",
  "Partner outreach", "Quarterly goals", "Research interviews", "Support escalations",
  "Vendor contracts", "Annual report", "Brand refresh", "Social media", "Weekly newsletter",
  "Conference booth", "Holiday campaign", "Data migration", "Security audit", "Recruiting",
  "Onboarding checklist", "Team offsite", "Podcast episodes", "Grant applications",
  "Volunteer schedule", "Inventory", "Warehouse operations", "Legal review", "Pricing experiments",
  "Customer feedback", "Localization", "Accessibility fixes", "API integrations",
  "Infrastructure upgrades", "Kitchen renovation", "Course curriculum", "Thesis chapters",
  "Fundraising", "Investor updates", "Board meeting prep", "Store opening", "Menu planning",
  "Photo shoot", "Video production", "Book launch", "Community events", "Training program",
  "Compliance tasks", "Release checklist", "Editorial pipeline", "Spring catalog",
}

M.CARDS = {
  "Draft the press release", "Update the pricing page", "Book the venue",
  "Review candidate portfolios", "Fix the login redirect", "Order new laptops",
  "Send invoices to clients", "Record the demo video", "Translate the help center",
  "Schedule user interviews", "Prepare the budget slides", "Renew the SSL certificate",
  "Write onboarding emails", "Clean up old tickets", "Test the checkout flow",
  "Plan the team lunch", "Collect survey results", "Design the landing page",
  "Migrate the customer database", "Approve the logo sketches", "Call the catering company",
  "Publish the changelog", "Audit user permissions", "Sign the office lease",
  "Hire a photographer", "Update the employee handbook", "Measure page speed",
  "Reply to partner emails", "Archive last quarter", "Set up the staging server",
  "Interview backend candidates", "Refresh product screenshots", "Pay the freelancers",
  "Check the contract terms", "Reserve hotel rooms", "Print the brochures",
  "Ship the beta build", "Fix broken links", "Write the quarterly summary",
  "Order office supplies", "Prepare tax documents", "Back up the shared drive",
  "Review the accessibility report", "Book flights for the summit", "Draft the job description",
  "Upload the podcast episode", "Finalize the seating chart", "Negotiate the vendor discount",
  "Test push notifications", "Update the sitemap", "Rotate the API keys", "Plan the webinar",
  "Send the newsletter", "Confirm the speakers", "Polish the pitch deck",
  "Label the inventory boxes", "Replace the broken monitor", "Count volunteer hours",
  "Proofread chapter two", "Submit the grant report",
}

-- { company name, email domain }
M.COMPANIES = {
  { "Northwind", "northwind.io" }, { "Acme Robotics", "acmerobotics.com" },
  { "Bluepeak Studio", "bluepeak.studio" }, { "Larkspur Health", "larkspurhealth.org" },
  { "Copperleaf Coffee", "copperleaf.coffee" }, { "Orbital Freight", "orbitalfreight.com" },
  { "Fernhill School", "fernhill.edu" }, { "Harbor and Finch", "harborfinch.co" },
  { "Quillmark Publishing", "quillmark.com" }, { "Tidewater Labs", "tidewaterlabs.io" },
  { "Summit Dental", "summitdental.net" }, { "Redwood Analytics", "redwoodanalytics.ai" },
  { "Mosaic Events", "mosaicevents.co" }, { "Ironbridge Legal", "ironbridgelegal.com" },
  { "Pinecrest Realty", "pinecrest.realty" }, { "Saltbox Design", "saltbox.design" },
  { "Kestrel Games", "kestrelgames.com" }, { "Meridian Travel", "meridiantravel.com" },
  { "Greenline Energy", "greenline.energy" }, { "Atlas Relief", "atlasrelief.org" },
  { "Juniper Foods", "juniperfoods.com" }, { "Vantage Security", "vantagesec.io" },
  { "Cobalt Marketing", "cobalt.agency" }, { "Birchwood Clinic", "birchwoodclinic.org" },
  { "Stellar Fitness", "stellarfit.com" }, { "Riverbend Library", "riverbendlib.org" },
  { "Nimbus Cloud", "nimbuscloud.dev" }, { "Oakridge Builders", "oakridgebuilders.com" },
  { "Lumen Photography", "lumenphoto.co" }, { "Wildflower Bakery", "wildflowerbakery.com" },
  { "Polaris Consulting", "polarisconsulting.com" }, { "Harvest Cooperative", "harvestcoop.org" },
  { "Silverline Media", "silverline.media" }, { "Keystone Accounting", "keystonecpa.com" },
  { "Brightside Tutoring", "brightsidetutoring.com" }, { "Falcon Logistics", "falconlogistics.net" },
  { "Evergreen Architects", "evergreenarch.com" }, { "Blue Heron Films", "blueheronfilms.com" },
  { "Crescent Biotech", "crescentbio.com" }, { "Velvet Records", "velvetrecords.fm" },
}

M.SURNAMES = {
  "lopez", "smith", "okafor", "tanaka", "novak", "garcia", "mueller", "rossi", "kim", "patel",
  "nguyen", "silva", "kowalski", "haddad", "johansson", "oconnor", "dubois", "yilmaz", "mensah",
  "ivanova", "costa", "berg", "fischer", "moreau", "santos", "wright", "chen", "ali", "jensen",
  "park", "romero", "schmidt", "bianchi", "sato", "adeyemi", "murphy", "kaur", "petrov", "lund",
  "alvarez",
}

-- Colleagues mentioned in tickets and follow-ups (not customers, not agents).
M.COLLEAGUES = {
  "Sara", "Miguel", "Hannah", "Arjun", "Chen", "Fatima", "Lukas", "Ruth", "Tobias", "Amina",
  "Pedro", "Lina", "Mateo", "Ayumi", "Rahul", "Greta", "Ollie", "Beatriz", "Nikos", "Esther",
}

M.CHANNELS = {
  "#design-team", "#marketing", "#eng-alerts", "#product", "#sales-wins", "#support",
  "#ops", "#launch", "#general", "#frontend", "#backend", "#hiring", "#finance", "#events",
  "#content", "#qa", "#growth", "#partners", "#releases", "#data-team", "#mobile", "#office",
}

-- Devices with their operating system family; the system and browser of a conversation are
-- drawn from the device's family, so an iPhone never runs Windows.
M.DEVICES = {
  { "iPhone 15", "ios" }, { "iPhone 13 mini", "ios" }, { "iPhone 16 Pro", "ios" },
  { "iPad Air", "ios" }, { "iPad mini", "ios" },
  { "Pixel 8", "android" }, { "Pixel 7a", "android" }, { "Galaxy S24", "android" },
  { "Galaxy A54", "android" }, { "Galaxy Tab S9", "android" }, { "OnePlus 12", "android" },
  { "MacBook Pro", "mac" }, { "MacBook Air", "mac" }, { "iMac", "mac" },
  { "Surface Laptop", "windows" }, { "ThinkPad X1", "windows" }, { "Dell XPS 13", "windows" },
  { "HP EliteBook", "windows" }, { "Chromebook", "chromeos" }, { "Framework Laptop", "linux" },
}
M.SYSTEMS = {
  ios = { "iOS 18.2", "iOS 17.6", "iOS 18.1", "iPadOS 18.2" },
  android = { "Android 14", "Android 15", "Android 13" },
  mac = { "macOS 14.5", "macOS 15.1", "macOS 13.6" },
  windows = { "Windows 11", "Windows 10" },
  chromeos = { "ChromeOS 129", "ChromeOS 130" },
  linux = { "Ubuntu 24.04", "Fedora 41" },
}
M.BROWSERS = {
  ios = { "Safari 17.6", "Safari 18.1", "Chrome 131", "Firefox 133" },
  android = { "Chrome 126", "Chrome 129", "Firefox 131", "Samsung Internet 26", "Edge 130" },
  mac = { "Safari 17.5", "Safari 18.1", "Chrome 127", "Firefox 128", "Arc 1.69", "Brave 1.71" },
  windows = { "Chrome 124", "Chrome 131", "Edge 125", "Edge 128", "Firefox 126", "Opera 114", "Vivaldi 6.9" },
  chromeos = { "Chrome 129", "Chrome 130" },
  linux = { "Firefox 133", "Chrome 131", "Brave 1.71" },
}

-- { code, meaning }: agents explain the code they are shown.
M.ERRORS = {
  { "E-4012", "the file is larger than the upload limit" },
  { "E-4031", "the upload timed out before it finished" },
  { "E-5002", "our servers were briefly unavailable" },
  { "E-4290", "too many requests arrived in a short time" },
  { "E-4100", "your session expired" },
  { "E-4403", "your role does not have permission for that board" },
  { "E-5120", "two devices changed the same card at once" },
  { "E-4091", "a card with the same identifier already exists" },
  { "E-4220", "a date in the import file has the wrong format" },
  { "E-5031", "the export queue was full" },
  { "E-4150", "the file type is not supported" },
  { "E-4404", "the board was moved or deleted" },
  { "E-5200", "the calendar feed could not be refreshed" },
  { "E-4018", "the attachment was blocked by the virus scanner" },
}

local FILE_STEMS = {
  "roadmap", "budget", "invoices", "backlog", "contacts", "survey-results", "team-photo",
  "contract", "brand-guide", "sprint-notes", "inventory", "payroll", "floor-plan", "minutes",
  "pitch-deck", "schedule", "price-list", "timeline", "checklist", "press-kit", "report",
}
local FILE_EXTS = { "csv", "csv", "json", "pdf", "pdf", "xlsx", "png", "docx", "zip", "jpg" }

-- Monthly price per seat in dollars; annual billing is ten times the monthly price.
local PRICE = { Team = 8, Business = 15 }

local function money(dollars, cents)
  local s = tostring(dollars)
  if #s > 3 then s = s:sub(1, -4) .. "," .. s:sub(-3) end
  return "$" .. s .. (cents and string.format(".%02d", cents) or "")
end

-- One value for every slot, drawn from `rng`. `customer` is the first name used in {email}.
local function draw_vars(rng, customer, plan)
  local company = rng:pick(M.COMPANIES)
  local err = rng:pick(M.ERRORS)
  local m = rng:int(12)
  local day = rng:int(MONTH_DAYS[m])
  local year = 2024 + rng:int(3)
  local seats = 2 + rng:int(38)
  local monthly = seats * PRICE[plan]
  local colleague = rng:pick(M.COLLEAGUES)
  local board = rng:pick(M.BOARDS)
  local device = rng:pick(M.DEVICES)
  local v = {
    customer = customer, plan = plan, other = plan == "Team" and "Business" or "Team",
    board = board, board2 = rng:pick(M.BOARDS), card = rng:pick(M.CARDS),
    company = company[1],
    email = customer:lower() .. "." .. rng:pick(M.SURNAMES) .. "@" .. company[2],
    colleague = colleague,
    cemail = colleague:lower() .. "@" .. company[2],
    channel = rng:pick(M.CHANNELS),
    device = device[1], os = rng:pick(M.SYSTEMS[device[2]]), browser = rng:pick(M.BROWSERS[device[2]]),
    error = err[1], meaning = err[2],
    file = rng:pick(FILE_STEMS) .. "-" .. year .. "." .. rng:pick(FILE_EXTS),
    sheet = rng:pick(FILE_STEMS) .. "-" .. year .. ".csv",
    -- the board's export file, e.g. q3-launch-plan.csv
    xfile = board:lower():gsub("[^%w]+", "-") .. "." .. (rng:chance(3, 4) and "csv" or "json"),
    invoice = "INV-" .. (10000 + rng:int(90000) - 1),
    seats = tostring(seats),
    amount = money(monthly, rng:chance(1, 2) and 0 or nil),
    annual = money(monthly * 10),
    month = MONTHS[m], date = MONTHS[m] .. " " .. day,
    isodate = string.format("%d-%02d-%02d", year, m, day),
    last4 = string.format("%04d", rng:int(10000) - 1),
    size = tostring(100 + rng:int(400)),
    cards = tostring(20 + rng:int(1980)),
  }
  return v
end
M.draw_vars = draw_vars

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

---------------------------------------------------------------------------------------------
-- Slot-bearing templates. These extend the tables above: more questions (never under "how" or
-- "my", so the export question keeps its frequency and "Hi, my" stays "Hi, my account"), new
-- intents, extra reply variants (appended, so each intent's first reply stays the most likely
-- one) and follow-ups that name boards, invoices, devices and so on. The values come from
-- draw_vars, one set per conversation, so later turns repeat the values of earlier ones.
---------------------------------------------------------------------------------------------
local MORE_QUESTIONS = {
  I = {
    { "I invited {colleague} to our workspace but the invite never arrived.", "invite_missing" },
    { "I accidentally deleted a card on the {board} board.", "restore_card" },
    { "I keep getting error {error} when I upload a file.", "error_upload" },
  },
  can = {
    { "can I restore a board I deleted yesterday?", "restore_board" },
    { "can guests comment on cards?", "guest_access" },
  },
  where = {
    { "where do I add custom fields to cards?", "custom_fields" },
    { "where can I see who changed a card?", "activity_log" },
  },
  does = {
    { "does the mobile app work offline?", "offline" },
    { "does Brightlane have an API for creating cards?", "api" },
  },
  is = {
    { "is my data stored in the EU?", "data_region" },
    { "is there a free trial of the Business plan?", "trial" },
  },
  why = {
    { "why is the {board} board so slow to load?", "bug_slow" },
    { "why can't my colleague see our board?", "permissions" },
  },
  what = {
    { "what does error {error} mean?", "error_meaning" },
    { "what can guests do on a board?", "guest_access" },
  },
}
for _, word in ipairs({ "I", "can", "where", "does", "is", "why", "what" }) do
  for _, q in ipairs(MORE_QUESTIONS[word]) do table.insert(QUESTIONS[word], q) end
end

local MORE_INTENTS = {
  invite_missing = { topic = "team", replies = {
    "Sorry about that. I've resent the invite to {cemail}. Please ask {colleague} to check spam too.",
    "Invites expire after seven days. I've sent a fresh one, so {colleague} should have it now.",
  } },
  restore_card = { topic = "cards", replies = {
    "No problem. Open the board menu, choose Trash, and restore the card within 30 days.",
    "Deleted cards stay in the trash for 30 days. I've restored the latest one on {board} for you.",
  } },
  error_upload = { topic = "bug", replies = {
    "Error {error} means {meaning}. Try again in a minute, and tell me if it persists.",
    "Sorry about that. {error} means {meaning}, and our engineers are looking into it today.",
  } },
  restore_board = { topic = "cards", replies = {
    "Yes, within 30 days. Open Settings, then Deleted boards, and click Restore.",
    "Yes. I've restored {board} for you, with all its cards, comments and attachments.",
  } },
  guest_access = { topic = "team", replies = {
    "Guests can view and comment on the boards you share with them, but they can't create boards.",
    "Invite them as guests from the board menu. They see only that board and can comment on cards.",
  } },
  custom_fields = { topic = "cards", replies = {
    "Open the board menu and choose Fields. You can add text, number, date and dropdown fields.",
    "Custom fields live under Fields in the board menu. Business boards can have up to 50 of them.",
  } },
  activity_log = { topic = "cards", replies = {
    "Open the card and choose Activity. Every change shows who made it and when.",
    "Each card has an Activity tab. Business workspaces also get an audit log under Security.",
  } },
  offline = { topic = "platform", replies = {
    "The mobile apps keep recent boards offline and sync your changes when you reconnect.",
    "Partly. The phone apps work offline for boards you opened recently; the web app needs a connection.",
  } },
  api = { topic = "platform", replies = {
    "Yes, our REST API can create and update cards. Create a token under Settings, then API.",
    "Yes. Generate an API token in Settings and follow the developer guide for the cards endpoint.",
  } },
  data_region = { topic = "platform", replies = {
    "Workspaces choose EU or US hosting when they are created. {company} is hosted in Frankfurt.",
    "It depends on the region picked at signup. Business workspaces can request a move to the EU.",
  } },
  trial = { topic = "plan", replies = {
    "Yes, a 14-day Business trial with every feature. No credit card is needed to start it.",
    "There is. I've started a 14-day Business trial for {company}, and nothing is charged when it ends.",
  } },
  bug_slow = { topic = "bug", replies = {
    "Very large boards load slower. Archiving old cards on {board} usually makes it fast again.",
    "Sorry about that. Please open {board} in a private window of {browser} to rule out extensions.",
  } },
  permissions = { topic = "team", replies = {
    "They need access to the board. Open the board menu, choose Share, and add them as a member.",
    "The board is private. Ask an admin to add {colleague}, or make the board visible to the workspace.",
  } },
  error_meaning = { topic = "bug", replies = {
    "{error} means {meaning}. Trying again after a minute usually fixes it.",
    "That code means {meaning}. If it keeps happening, send me a screenshot and the time it happened.",
  } },
}
for name, intent in pairs(MORE_INTENTS) do
  assert(not INTENTS[name], name)
  INTENTS[name] = intent
end

-- Extra replies for the original intents (export_board keeps exactly its three replies).
local MORE_REPLIES = {
  export_csv = { "Open {board}, then the board menu, and choose Export and CSV. Each of its {cards} cards becomes one row." },
  export_json = { "Yes. Export {board} from the board menu and pick JSON; you get a file with all {cards} cards." },
  export_all = { "Yes. As an admin of {company} you can use Settings, then Data export, and we email a link to {email}." },
  export_formats = { "CSV and JSON. Export is in the board menu, and a board like {board} downloads in seconds." },
  duplicate_charge = { "I see two charges of {amount} on {date}. The second one is refunded and invoice {invoice} is corrected." },
  refund_request = { "Sure. I've refunded {amount} to the card ending in {last4}. It takes a few business days." },
  invoice_copy = { "I've emailed invoice {invoice} for {month} to {email}. It is also under Settings, then Billing." },
  invoice_address = { "Done. Invoice {invoice} now shows {company} and the address you gave us." },
  annual_switch = { "Yes. For {seats} seats on {plan} that is {annual} a year instead of {amount} every month." },
  annual_discount = { "Yes. For {seats} seats you'd pay {annual} a year instead of twelve payments of {amount}." },
  upgrade = { "Open Settings, then Billing, then Change plan. All {seats} seats of {company} move to Business at once." },
  upgrade_missing = { "Thanks for waiting. Invoice {invoice} was paid, so I've moved {company} to Business now." },
  plan_info = { "{company} is on the {plan} plan with {seats} seats. It renews on {date}." },
  plan_sso = { "Yes. With Business, {company} can sign in through SSO and manage all {seats} seats centrally." },
  payment_methods = { "Yes, for annual plans. For {seats} seats on {plan} the yearly invoice would be {annual}." },
  password_reset = { "I've sent a reset link to {email}. It stays valid for one hour." },
  reset_email_missing = { "I've sent a new reset link to {email}. Please check spam if it isn't there in a minute." },
  twofa_enable = { "Open Settings, then Security, and turn on Two-factor login. Most people use an app on their phone." },
  twofa_locked = { "I've sent a verification link to {email}. Once you confirm it, I'll reset two-factor for you." },
  account_locked = { "I've unlocked it. The failed attempts came from {browser} on {os}, so change your password if that wasn't you." },
  email_change = { "I can do that. Reply with the new address and I'll confirm the change with {email} first." },
  slack_connect = { "Open Integrations in the board menu, choose Slack, and pick a channel such as {channel}." },
  slack_what = { "It posts new cards, moves and comments. For example, updates on {board} can go to {channel}." },
  calendar_connect = { "Yes. Under Integrations choose Google Calendar, and due dates on {board} appear as events." },
  bug_sync = { "Sorry about that. On your {device}, sign out and back in to force a sync, then check {board} again." },
  bug_notifications = { "Please check the notification settings on your {device} too. {os} sometimes turns them off after an update." },
  bug_attachments = { "Error {error} means {meaning}. Files up to 100 MB work on every plan." },
  feature_dark_mode = { "Thanks, {customer}! Dark mode is planned, and I've added {company} to the request." },
  feature_recurring = { "Not yet. As a workaround, copy a card like \"{card}\" and set a new due date each week." },
  feature_teams = { "Not yet. Slack works today, and I've added {company} to the Microsoft Teams request." },
  cancel = { "I can do that for you. {company} keeps access until {date}, and the confirmation goes to {email}." },
  cancel_data = { "Your boards stay read-only for 30 days. Export {board} and the others before then if you need a copy." },
  nonprofit = { "Yes, registered nonprofits get half price. Send the registration to me and I'll update {company}." },
}
for name, list in pairs(MORE_REPLIES) do
  for _, r in ipairs(list) do table.insert(INTENTS[name].replies, r) end
end

local MORE_FOLLOWUPS = {
  export = {
    { "It's the {board} board, it has about {cards} cards.", {
      "That's fine. A board with {cards} cards exports in well under a minute.",
      "No problem, boards of that size export in a few seconds." } },
    { "The file {xfile} won't open in Excel.", {
      "Import it with Data, then From Text, and choose UTF-8. That keeps accents and emoji intact." } },
    { "Can I schedule a weekly export of {board}?", {
      "Not yet, but the API can pull a JSON export on a schedule. I've added your vote for scheduled exports." } },
    { "The export stops with error {error}.", {
      "Error {error} means {meaning}. Please try again in a few minutes and tell me if it keeps happening." } },
    { "Can I import the JSON into another workspace?", {
      "Yes, go to Settings, then Import, and upload the JSON file. Cards, lists and labels come across." } },
  },
  billing = {
    { "The charge was {amount} on {date}, invoice {invoice}.", {
      "Thanks, I found invoice {invoice}. The refund of {amount} goes back to the card ending in {last4}.",
      "Got it. {invoice} is marked as refunded, and you'll see {amount} back within a week." } },
    { "Can you send the receipt to {email}?", {
      "Done, the receipt for {invoice} is on its way to {email}." } },
    { "How is the {amount} total calculated?", {
      "{plan} is billed per seat, so {seats} seats come to {amount} a month before tax." } },
    { "Which card was charged?", {
      "The card ending in {last4}. You can change it under Settings, then Billing, then Payment method." } },
  },
  invoice = {
    { "The invoice should be addressed to {company}.", {
      "Done. Invoice {invoice} now shows {company}, and future invoices will too." } },
    { "Please also send invoices to {cemail}.", {
      "Sure, {cemail} is now a billing contact and gets every new invoice." } },
    { "I need the invoice from {date} as well.", {
      "I've emailed the {month} invoice to {email}. It's also in Billing, then Invoices." } },
    { "Can the invoice show our purchase order number?", {
      "Yes, add the PO number under Company details and it appears on every new invoice." } },
  },
  annual = {
    { "How much would annual cost for {seats} seats?", {
      "On {plan} that is {annual} a year, compared to {amount} every month." } },
    { "Can the annual plan start on {date}?", {
      "Yes, I've scheduled the switch for {date}. The invoice arrives that morning." } },
    { "Do we get money back if we remove seats mid-year?", {
      "Removed seats become credit on the next renewal rather than a cash refund." } },
  },
  plan = {
    { "We have {seats} people, which plan fits best?", {
      "For {seats} people most teams start on Team. Choose Business if you need SSO or audit logs." } },
    { "Can I make {colleague} an admin?", {
      "Yes, open Settings, then Members, find {colleague} and change the role to Admin." } },
    { "What happens to our {seats} seats after the change?", {
      "All {seats} seats move to the new plan, and the price is prorated for this period." } },
  },
  login = {
    { "My email is {email}.", {
      "Thanks, I found the account for {email} and sent the link there." } },
    { "I'm using {browser} on {os}.", {
      "Thanks. Please clear cookies for Brightlane in {browser} and try again.",
      "{browser} is supported. Try a private window to rule out an extension." } },
    { "I got a new {device}, how do I move my codes?", {
      "Use a backup code on the {device}, then scan a new QR code under Security settings." } },
    { "Can {colleague} reset my password for me?", {
      "No, only you can reset it, but a workspace admin can send you a new link." } },
  },
  integration = {
    { "I want the updates in {channel}.", {
      "Open the integration settings on {board} and choose {channel} as the channel." } },
    { "Nothing shows up in {channel} since {date}.", {
      "The Slack token may have expired. Reconnect Slack in the board menu and pick {channel} again." } },
    { "Can two boards post to one channel?", {
      "Yes, connect {board} and {board2} one at a time and pick the same channel for both." } },
    { "Does it work with Zapier?", {
      "Yes, our Zapier app can create cards and react to moves, comments and due dates." } },
  },
  bug = {
    { "I'm using my {device} with {os}.", {
      "Thanks. Please update the app and restart the {device}, then tell me if it still happens.",
      "That setup is supported. I've passed the details to our mobile team." } },
    { "It happens in {browser} too.", {
      "Thanks for checking {browser}. I've added that to the bug report for our engineers." } },
    { "The screen shows error {error}.", {
      "Error {error} means {meaning}. I've attached it to your report." } },
    { "It started on {date} on the {board} board.", {
      "Thanks, that helps. I can see errors on {board} since {date} and have escalated them." } },
    { "The file is {size} MB.", {
      "Attachments are limited to 100 MB, so a {size} MB file needs to be split or shared as a link." } },
    { "The card \"{card}\" is the one that fails.", {
      "Thanks. I've reproduced it with \"{card}\" and sent it to the engineers." } },
  },
  feature = {
    { "We'd use it for the {board} board.", {
      "Thanks, that use case helps the product team prioritise it." } },
    { "Our whole team at {company} wants this.", {
      "Thanks, I've added {company} to the request with a note about your {seats} seats." } },
    { "Is there a beta I can join?", {
      "Not yet, but I've put {email} on the list for early access." } },
  },
  cancel = {
    { "Please send the confirmation to {email}.", {
      "Done. The cancellation confirmation is on its way to {email}." } },
    { "We moved to another tool, that's all.", {
      "Understood. Your access continues until {date}, and you can export everything before then." } },
    { "Can {colleague} keep using the {board} board?", {
      "Only until {date}. After that {colleague} would need a workspace of their own." } },
    { "Will you delete our data right away?", {
      "No, we keep it for 30 days after {date} and then delete it for good." } },
  },
  team = {
    { "The invite went to {cemail}.", {
      "I've resent it to {cemail}. Invites stay valid for seven days." } },
    { "Can guests see every board?", {
      "No, guests only see the boards you share with them, like {board}." } },
    { "How many guests can we add?", {
      "Team allows 10 guests per workspace and Business allows unlimited guests." } },
    { "Can I make {colleague} an admin?", {
      "Yes, in Settings, then Members, change the role of {colleague} to Admin." } },
  },
  cards = {
    { "It was called \"{card}\".", {
      "Found it. \"{card}\" is back on the {board} board with its comments." } },
    { "Can I see who moved it?", {
      "Yes, open the card and check Activity. Every move and edit is listed with a time." } },
    { "Are attachments restored too?", {
      "Yes, attachments, checklists and comments all come back with the card." } },
  },
  platform = {
    { "Is there a rate limit?", {
      "Yes, 100 requests per minute per token. Going over returns error E-4290." } },
    { "We are on {browser}, does that matter?", {
      "{browser} is supported. Clearing the cache often helps with slow boards." } },
    { "Where are backups stored?", {
      "Backups are encrypted and kept in the same region as your workspace for 30 days." } },
    { "Do you have a status page?", {
      "Yes, status.brightlane.app lists incidents and planned maintenance." } },
  },
}
for _, topic in ipairs({ "export", "billing", "invoice", "annual", "plan", "login", "integration",
                         "bug", "feature", "cancel", "team", "cards", "platform" }) do
  FOLLOWUPS[topic] = FOLLOWUPS[topic] or {}
  for _, f in ipairs(MORE_FOLLOWUPS[topic]) do table.insert(FOLLOWUPS[topic], f) end
end

local THANKS = {
  "Great, thank you!", "Perfect, that's what I needed.", "Thanks for the help!", "Got it, thanks.",
  "That fixed it, thanks {agent}!", "Brilliant, that saves me a lot of time.", "Thanks, I'll tell the team.",
}
local BYES = {
  "Glad I could help. Have a great day!", "You're welcome! Reach out anytime.",
  "Happy to help. Have a good one!", "Anytime, {customer}. Good luck with the {board} board!",
  "You're welcome. Say hello to everyone at {company}!",
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

  -- with slots (see draw_vars)
  { "Invoice {invoice} shows {amount} but we only have {seats} seats", "billing", "medium", true },
  { "Please send a copy of invoice {invoice} to {cemail}", "billing", "low", false },
  { "We were charged {amount} twice on {date}", "billing", "high", true },
  { "Our card ending in {last4} expired, how do we update it", "billing", "low", false },
  { "The invoice dated {isodate} lists the wrong company name", "billing", "low", false },
  { "Please move the owner role from {email} to {cemail}", "account", "medium", true },
  { "I can't log in with {email} since {date}", "account", "high", true },
  { "Our colleague {colleague} left, please remove their access", "account", "high", true },
  { "Uploading {file} fails with error {error}", "bug", "medium", false },
  { "The {board} board does not load in {browser}", "bug", "high", false },
  { "The app crashes on my {device} with {os}", "bug", "high", false },
  { "Slack stopped posting to {channel} on {date}", "bug", "medium", false },
  { "How do I add {colleague} to the {board} board", "how_to", "low", false },
  { "How do I import {sheet} into a board", "how_to", "low", false },
  { "How do I send card updates to {channel}", "how_to", "low", false },
  { "Please add a Gantt chart view for our {board} board", "feature_request", "low", false },
  { "We need an offline mode for the app on {os}", "feature_request", "low", false },
  { "Can you add a Zapier trigger for new comments", "feature_request", "low", false },
  { "Please let us import spreadsheets with more than 5,000 rows", "feature_request", "low", false },
  { "Please cancel the {company} workspace before {date}", "cancellation", "high", true },
  { "We are closing {company}, cancel our subscription", "cancellation", "medium", true },
  { "Cancel our {plan} plan and send the final invoice to {email}", "cancellation", "medium", true },
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
  local vars = draw_vars(rng, customer, plan)
  vars.agent = agent
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
  local plan = rng:chance(3, 5) and "Team" or "Business"
  local vars = draw_vars(rng, rng:pick(M.CUSTOMERS), plan)
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
  -- lexical variety: distinct letter runs (case-sensitive) and distinct digit runs
  local words, numbers = {}, {}
  s.distinct_words, s.distinct_numbers = 0, 0
  for w in text:gmatch("%a+") do
    if not words[w] then words[w] = true; s.distinct_words = s.distinct_words + 1 end
  end
  for d in text:gmatch("%d+") do
    if not numbers[d] then numbers[d] = true; s.distinct_numbers = s.distinct_numbers + 1 end
  end
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
  add("distinct words (letter runs) %d, distinct digit runs %d", s.distinct_words, s.distinct_numbers)
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
